"""The tracer: runs the computation in order and records every step once, under its id.

`run()` resolves the arithmetic and plans the steps (ids, formulas, axes, shapes: run_setup.py), then
computes them, all at once for small scenarios, one head at a time on demand for large ones, so that a
GPT-3-size layer never holds more than a few heads' intermediates. How the numbers are computed
(per-stage kernels, or fused ones for large scenarios) is `compute.py`'s business.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict
from functools import cached_property

import numpy as np

from . import compute, memory
from .arithmetic import Arithmetic
from .errors import AttentionWarning, ScenarioError
from .mechanisms.indexer import compute as _indexer
from .given_inputs import SYMBOLS
from .ids import parse
from .masks import allowed_matrix, mask_matrix
from .plan import head_ids
from .ranges import check_fits, overflow, underflow
from .run_setup import setup
from .scenario import Scenario, load_scenario
from .steps import Step
from .steps.base import hider


class Trace:
    """Every intermediate of one run: `trace[id]` is the array (in the trace's layout),
    `trace.steps` the steps in computation order, `trace.explain(id, row, col)` one cell's story."""

    def __init__(self, scenario: Scenario, arithmetic: Arithmetic, layout: str, mask, steps, lazy: bool,
                 engine: str = "auto", by_id: dict | None = None, ids: list | None = None):
        self.scenario, self.arithmetic, self.layout, self.mask = scenario, arithmetic, layout, mask
        self.columns = layout == "columns"      # arrays are kept in rows orientation, shown transposed
        self.steps: list[Step] = steps
        self.lazy = lazy
        self.engine = compute.engine_for(scenario, engine)
        self.may_interpret = engine == "auto"   # a tiny trace may skip loading numba (compute.stages)
        self.kernels = None                     # the stage kernels this trace runs on, once chosen
        self.warnings: list[str] = []
        self.dtype = np.dtype(arithmetic.dtype)
        self._by_id = {s.id: s for s in steps} if by_id is None else by_id
        self._data: dict[str, np.ndarray] = {}   # rows orientation
        self._later: dict = {}                   # id → what builds a step kept for when it is first read
        self._resident: OrderedDict[int, None] = OrderedDict()
        check_fits(scenario, self.dtype)
        self.x = scenario.cast(scenario.x, self.dtype)   # rows orientation (read only: kept per scenario)
        self._data["x"] = self.x
        self._ids = ids if ids is not None else head_ids(steps, scenario.heads, scenario.groups)
        self._done: set[int] = set()      # heads whose steps are computed (and not dropped since)
        self._decoded = None              # a [decode] run's packed arrays (tracer/decode.py)
        self.memo: dict = {}              # what several heads share, computed once (layer.shared)
        if any(s.spec.scope == "input" and s.id != "x" for s in steps):   # context, norm_in, freqs, latents
            self._record(compute.inputs(self))

    # ------------------------------------------------------------ reading
    @cached_property
    def allowed(self) -> np.ndarray | None:
        """query × key booleans (True: may attend), None when nothing is masked. Built when first
        asked: the fused kernels apply a causal mask by index, so a large causal trace never needs
        the n × m matrix (0.8 ms of a GPT-2-small trace's 46)."""
        allowed = allowed_matrix(self.mask, self.scenario.n, self.scenario.m)
        if self.scenario.sparse is not None:   # the lightning indexer's choice hides the other keys
            allowed = allowed & (self.rows("idx.selected") != 0)
        return allowed

    @property
    def heads(self) -> int:
        return self.scenario.heads

    def step(self, sid: str) -> Step:
        try:
            return self._by_id[sid]
        except KeyError:
            raise ScenarioError("step", f"unknown step {sid!r}; expected one of "
                                f"{', '.join(s.id for s in self.steps)}") from None

    def __contains__(self, sid: str) -> bool:
        return sid in self._by_id

    def __getitem__(self, sid: str) -> np.ndarray:
        a = self.rows(sid)
        return a.T if self.columns else a

    def rows(self, sid: str) -> np.ndarray:
        """The array in the rows orientation (query/token first), whatever the layout."""
        a = self._data.get(sid)
        if a is None:
            if sid not in self._later:
                self._compute(self.step(sid))
            if sid in self._later:   # built now, from what its head kept (a linear layer's states)
                a = self._later.pop(sid)()
                self._data[sid] = a
                if not np.isfinite(a).all():
                    overflow(self, [self.step(sid)])
            a = self._data[sid]
        return a

    def held(self, sid: str) -> np.ndarray | None:
        """A step's array in the rows orientation if it has been computed, else None."""
        return self._data.get(sid)

    def hold(self, arrays: dict) -> None:
        """Records arrays (rows orientation) computed ahead of their head, e.g. a group's keys."""
        self._record(arrays)

    def plan_ids(self, head: int) -> dict[str, str]:
        """The id of each kind head `head` computes or reads: its own steps and its group's."""
        return self._ids[head]

    def weight(self, name: str, head: int = 0, *, group: int | None = None) -> np.ndarray:
        """A weight matrix (q, k, v, v_down, v_up, o) as the layout writes it: the one query head
        `head` reads (its group's, for the keys' and values' weights when grouped), or group
        `group`'s when given."""
        sc = self.scenario
        if name == "o":
            return sc.w_o.T if self.columns else sc.w_o
        m = {"q": sc.w_q, "k": sc.w_k, "v": sc.w_k if sc.v_is_k else sc.w_v,
             "v_down": sc.w_v_down, "v_up": sc.w_v_up}[name]
        index = head if name == "q" else self.group_of(head) if group is None else group
        return m[index].T if self.columns else m[index]

    def group_of(self, head: int) -> int:
        """The key/value group query head `head` reads: h·G/H (PyTorch's enable_gqa order)."""
        return head // (self.scenario.heads // self.scenario.groups)

    def weight_name(self, name: str, head: int | None = None, *, group: int | None = None) -> str:
        """`W_K (group 1, read by heads 2 and 3)`, `W_Q (head 0)`, `W_O`: what a panel calls a weight."""
        symbol = SYMBOLS.get(name, name)
        sc = self.scenario
        if name == "o" or (head is None and group is None):
            return symbol
        if name != "q" and sc.groups < sc.heads:
            g = self.group_of(head) if group is None else group
            share = sc.heads // sc.groups
            readers = list(range(g * share, (g + 1) * share))
            who = f"head {readers[0]}" if share == 1 else "heads " + ", ".join(map(str, readers[:-1])) + f" and {readers[-1]}"
            return f"{symbol} (group {g}, read by {who})"
        return f"{symbol} (head {head if head is not None else group})"

    def nbytes(self) -> int:
        """Bytes of the full trace, computed or not (each step counted as if it had its own copy)."""
        return sum(s.shape[0] * s.shape[1] for s in self.steps) * self.dtype.itemsize

    def held_bytes(self) -> int:
        """Bytes of memory the trace holds now: each array's own buffer counted once (views of
        one buffer, like a decode's growing cache, share it)."""
        seen, total = set(), 0
        arrays = list(self._data.values())
        if self._decoded is not None:
            d = self._decoded
            arrays += [d.k, d.v, d.q, d.q_rot, d.grid, d.sums, d.z, *d.layer.values()]
        for a in arrays:
            base = a
            while isinstance(base.base, np.ndarray):
                base = base.base
            if id(base) not in seen:
                seen.add(id(base))
                total += base.nbytes
        return total

    def explain(self, sid: str, row: int, col: int, fractions: bool = True) -> str:
        """How one cell was computed, with the actual numbers (row, col in the trace's layout)."""
        from .explain import explain
        return explain(self, sid, row, col, fractions)

    def sources(self, sid: str, row: int, col: int) -> dict[str, list[tuple[int, int]]]:
        """The cells (in the layout) that one cell was computed from, by step id."""
        from .explain import sources
        return sources(self, sid, row, col)

    # ------------------------------------------------------------ notebooks
    def _repr_html_(self) -> str:
        """The trace in a notebook: a step list and each step's heatmap (tracer/html.py)."""
        from .html import trace_html
        return trace_html(self)

    def show(self, step=None, *, figure: str = "heatmap", blank: bool = False):
        """Steps (an id or a list; default the first heads' weights) drawn inline in a notebook as
        `attnsim export --figure` draws them: `heatmap`, `worksheet` (their head) or `lines`."""
        from .notebook import show
        return show(self, step, figure, blank)

    def __repr__(self) -> str:
        from .notebook import trace_repr
        return trace_repr(self)

    # ------------------------------------------------------------ computing
    def compute_all(self) -> "Trace":
        """Every step; a lazy trace computes each head in turn and keeps only the last few."""
        if self.scenario.decode is not None:
            self._decode()
            return self
        if self.lazy or self.engine == "stages":
            for h in range(self.heads):
                self._head(h)
        elif not all(self._ids[h]["z"] in self._data for h in range(self.heads)):
            heads = list(range(self.heads))
            self._record_heads(heads, *compute.fused_heads(self, heads))
            self._done.update(heads)
        if any(s.spec.scope == "layer" for s in self.steps):   # concat, out, its norm, the residual
            self._tail()
        return self

    def _compute(self, step: Step) -> None:
        if self.scenario.decode is not None:
            self._decode(step.id)
        elif step.head is not None:
            self._head(step.head)
            if step.id not in self._data and step.key in ("blk_scores", "blk_powers", "blk_acc"):
                from . import online   # the compiled path keeps each block's statistics, not its tiles
                self._record(online.tiles(self, step.head))
        elif step.group is not None:   # a group's keys and values: computed with its first head
            self._head(step.group * (self.scenario.heads // self.scenario.groups))
        elif step.id != "x":
            self._tail()

    def _record(self, arrays: dict) -> None:
        """Keeps each array (rows orientation) under its id; a callable in place of an array builds
        it when the step is first read (a step far larger than what it is built from)."""
        for sid, a in arrays.items():
            if callable(a):
                self._later[sid] = a
            else:
                self._data[sid] = a

    def _record_heads(self, heads: list[int], arrays: dict, bad: list[int]) -> None:
        self._record(arrays)
        for h in bad:
            overflow(self, [s for s in self.steps if s.head == h])
        if self.arithmetic.normalize == "softmax" and self.scenario.linear is None:   # a linear layer has no powers
            for h in heads:
                underflow(self, h, self.rows(self._ids[h]["sums"]))

    def _head(self, h: int) -> np.ndarray:
        """Computes head h's steps (if not held already); returns its z (rows orientation)."""
        ids = self._ids[h]
        if h not in self._done:
            if self.engine == "fused":
                self._record_heads([h], *compute.fused_heads(self, [h]))
            else:
                arrays, finite = compute.stage_head(self, h)
                self._record_heads([h], arrays, [] if finite else [h])
            self._resident[h] = None
            self._done.add(h)
            if self.lazy:
                while len(self._resident) > memory.RESIDENT_HEADS:
                    old, _ = self._resident.popitem(last=False)
                    self._done.discard(old)
                    for s in self.steps:  # keep the small z (gated): the tail needs every head's
                        if s.head == old and s.kind not in ("z", "gated"):
                            self._data.pop(s.id, None)
                            self._later.pop(s.id, None)
        elif h in self._resident:
            self._resident.move_to_end(h, last=True)
        return self.rows(ids.get("gated", ids["z"]))

    def _decode(self, sid: str | None = None) -> None:
        """A [decode] run: everything at once the first time (prefill, then token by token); a
        decoded token's step is a view of the packed arrays, made when it is asked for."""
        if self._decoded is None:
            from . import decode
            from .mechanisms.latent import compute as latent   # under latent attention the cache is c_kv and k_pe
            from .mechanisms.linear import decode as linear   # under linear attention the cache is the state
            compute_ = latent.decode if self.scenario.mla is not None else \
                linear.decode if self.scenario.linear is not None else decode.compute
            arrays, self._decoded, finite = compute_(self, run)   # run: the prefill's trace
            self._record(arrays)
            if not finite:
                overflow(self, [s for s in self.steps if parse(s.id).token is not None])
        if sid is not None and sid not in self._data and parse(sid).token is not None:
            self._record({sid: self._decoded.view(sid)})

    def _tail(self) -> None:
        # each head's z (gated) as held: a lazy trace keeps it when it lets the head's other steps go
        held = [self._data.get(self._ids[h].get("gated", self._ids[h]["z"])) for h in range(self.heads)]
        arrays = compute.tail(self, [self._head(h) if z is None else z for h, z in enumerate(held)])
        self._record(arrays)
        if not all(np.isfinite(a).all() for a in arrays.values()):
            overflow(self, [s for s in self.steps if s.head is None and s.id != "x"])


def run(scenario, arithmetic: str | None = None, *, lazy: bool | None = None, engine: str = "auto",
        **overrides) -> Trace:
    """Trace a scenario (a Scenario, a built-in name or a path) under a preset (`exact`,
    `by-hand`; default: the scenario's) with any arithmetic keys changed on top of it.

    lazy: None decides by size (memory.EAGER_BYTES); True computes heads on demand, keeping a few;
    False computes everything now (refused, with the estimate, if it cannot fit), but for what
    is built from a head's own steps when first read (a linear layer's states and implied weights).
    engine: "auto", "stages" (one kernel per step) or "fused" (large-scenario kernels)."""
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    if engine not in ("auto", "stages", "fused"):
        raise ScenarioError("engine", f"expected auto, stages or fused, got {engine!r}")
    arith, layout, mask, (steps, by_id, cells, ids) = setup(scenario, arithmetic, overrides)
    trace = Trace(scenario, arith, layout, mask, steps, lazy=False, engine=engine, by_id=by_id, ids=ids)
    nbytes = cells * trace.dtype.itemsize
    if lazy is None:  # by size, and lazy anyway when the whole would not fit
        trace.lazy = nbytes > memory.EAGER_BYTES or not memory.fits(nbytes)
    else:
        trace.lazy = bool(lazy)
        if not trace.lazy and not memory.fits(nbytes):
            raise ScenarioError("lazy", f"the whole trace {memory.shortfall(nbytes)}; expected lazy=True (heads "
                                "computed on demand, a few kept) or fewer tokens", scenario.source)
    allowed = mask_matrix(trace)
    hides = hider(scenario)   # an additive mask's −∞ hides keys too, head by head
    if hides is not None:
        lonely = [f"{scenario.tokens[i]} (head {h})" for h in range(scenario.heads)
                  for i in np.flatnonzero(hides(trace, h).all(axis=1))]
    else:
        lonely = [] if allowed is None else [scenario.tokens[i] for i in np.flatnonzero(~allowed.any(axis=1))]
    if lonely:
        message = (f"{', '.join(lonely)}: every key is masked for this query, so its weights are all 0 "
                   "(as PyTorch's scaled_dot_product_attention does)")
        trace.warnings.append(message)
        warnings.warn(message, AttentionWarning, stacklevel=2)
    tied = [] if scenario.sparse is None or "idx.scores" not in trace else _indexer.ties(trace)
    if tied:   # the lightning indexer's choice rests on how a tie was broken
        message = (f"{', '.join(tied)}: a tie at the {_indexer.topk.nth(_indexer.k_of(trace))} best index score; "
                   "the earlier key is kept (torch.topk leaves that order unspecified)")
        trace.warnings.append(message)
        warnings.warn(message, AttentionWarning, stacklevel=2)
    return trace if trace.lazy else trace.compute_all()
