"""The tracer: runs the kernels in order and records every step once, under its id.

`run()` resolves the arithmetic, plans the steps (ids, formulas, axes, shapes) and computes
them, all at once for small scenarios, one head at a time on demand for large ones, so that a
GPT-3-size layer never holds more than a few heads' intermediates. How the numbers are computed
(per-stage kernels, or fused ones for large scenarios) is `compute.py`'s business.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict

import numpy as np

from . import compute
from .arithmetic import Arithmetic, resolve
from .errors import AttentionWarning, ScenarioError
from .plan import allowed_matrix, cached_plan
from .scenario import Scenario, load_scenario, read_mask
from .steps import Step

EAGER_BYTES = 1 << 30   # traces up to this size are computed whole; larger ones per head on demand
RESIDENT_HEADS = 2      # heads whose full intermediates a lazy trace keeps at once
MEMORY_SHARE = 0.7      # of the machine's RAM that a whole trace may take (and 90% of what is free)


class Trace:
    """Every intermediate of one run: `trace[id]` is the array (in the trace's layout),
    `trace.steps` the steps in computation order, `trace.explain(id, row, col)` one cell's story."""

    def __init__(self, scenario: Scenario, arithmetic: Arithmetic, layout: str, mask, steps, lazy: bool,
                 engine: str = "auto", by_id: dict | None = None):
        self.scenario, self.arithmetic, self.layout, self.mask = scenario, arithmetic, layout, mask
        self.columns = layout == "columns"      # arrays are recorded transposed (views)
        self.allowed = allowed_matrix(mask, scenario.n)  # query × key, bool; None: nothing masked
        self.steps: list[Step] = steps
        self.lazy = lazy
        self.engine = compute.engine_for(scenario, engine)
        self.may_interpret = engine == "auto"   # a tiny trace may skip loading numba (compute.stages)
        self.warnings: list[str] = []
        self.dtype = np.dtype(arithmetic.dtype)
        self._by_id = {s.id: s for s in steps} if by_id is None else by_id
        self._data: dict[str, np.ndarray] = {}
        self._resident: OrderedDict[int, None] = OrderedDict()
        _check_fits(scenario, self.dtype)
        self._x = np.ascontiguousarray(scenario.x, dtype=self.dtype)
        self._record("x", self._x)

    # ------------------------------------------------------------ reading
    @property
    def heads(self) -> int:
        return self.scenario.heads

    def step(self, step_id: str) -> Step:
        try:
            return self._by_id[step_id]
        except KeyError:
            raise ScenarioError("step", f"unknown step {step_id!r}; expected one of "
                                f"{', '.join(s.id for s in self.steps)}") from None

    def __contains__(self, step_id: str) -> bool:
        return step_id in self._by_id

    def __getitem__(self, step_id: str) -> np.ndarray:
        step = self.step(step_id)
        if step_id not in self._data:
            self._compute(step)
        return self._data[step_id]

    def rows(self, step_id: str) -> np.ndarray:
        """The array in the rows orientation (query/token first), whatever the layout."""
        a = self[step_id]
        return a.T if self.columns else a

    def weight(self, name: str, head: int = 0) -> np.ndarray:
        """A weight matrix (q, k, v, v_down, v_up, o) as the layout writes it."""
        m = {"q": self.scenario.w_q, "k": self.scenario.w_k, "v": self.scenario.w_v,
             "v_down": self.scenario.w_v_down, "v_up": self.scenario.w_v_up}.get(name)
        m = self.scenario.w_o if name == "o" else m[head]
        return m.T if self.columns else m

    def nbytes(self) -> int:
        """Bytes of the full trace, computed or not."""
        return sum(s.shape[0] * s.shape[1] for s in self.steps) * self.dtype.itemsize

    def explain(self, step_id: str, row: int, col: int, fractions: bool = True) -> str:
        """How one cell was computed, with the actual numbers (row, col in the trace's layout)."""
        from .explain import explain
        return explain(self, step_id, row, col, fractions)

    def sources(self, step_id: str, row: int, col: int) -> dict[str, list[tuple[int, int]]]:
        """The cells (in the layout) that one cell was computed from, by step id."""
        from .explain import sources
        return sources(self, step_id, row, col)

    # ------------------------------------------------------------ computing
    def compute_all(self) -> "Trace":
        """Every step; a lazy trace computes each head in turn and keeps only the last few."""
        if self.lazy:
            for h in range(self.heads):
                self._head(h)
        elif self.engine == "stages":
            for h in range(self.heads):
                if f"h{h}.scores" not in self._data:
                    compute.stage_head(self, h)
        elif not all(f"h{h}.z" in self._data for h in range(self.heads)):
            compute.fused_heads(self, list(range(self.heads)))
        if self.heads > 1 or self.scenario.w_o is not None or self.scenario.residual:
            self._tail()
        return self

    def _compute(self, step: Step) -> None:
        if step.head is not None:
            self._head(step.head)
        elif step.id != "x":
            self._tail()

    def _record(self, step_id: str, a: np.ndarray) -> np.ndarray:
        self._data[step_id] = a.T if self.columns else a
        return a

    def _head(self, h: int) -> np.ndarray:
        """Computes head h's steps (if not held already); returns its z (rows orientation)."""
        p = f"h{h}."
        if p + "scores" not in self._data:
            if self.engine == "fused":
                compute.fused_heads(self, [h])
            else:
                compute.stage_head(self, h)
            self._resident[h] = None
            if self.lazy:
                while len(self._resident) > RESIDENT_HEADS:
                    old, _ = self._resident.popitem(last=False)
                    for s in self.steps:  # keep the small z: the tail needs every head's
                        if s.head == old and s.kind != "z":
                            self._data.pop(s.id, None)
        elif h in self._resident:
            self._resident.move_to_end(h, last=True)
        return self.rows(p + "z")

    def _tail(self) -> None:
        compute.tail(self, [self._head(h) for h in range(self.heads)])

    def _overflow(self, steps: list[Step]):
        """Names the first step whose values left the dtype's range (never a silent inf/NaN)."""
        for step in steps:
            a = self.rows(step.id)
            bad = np.isnan(a) | (a == np.inf) | ((a == -np.inf) & (step.kind != "masked"))
            if bad.any():
                r, c = np.argwhere(bad)[0]
                value = a[r, c]
                if self.columns:  # say where it is as the layout writes it
                    r, c = c, r
                hint = ("raw powers overflow: set stable=true (subtract each query's max first) or scale the "
                        "scores down" if step.kind in ("exp", "sums") else
                        "expected inputs small enough for this dtype")
                raise ScenarioError(step.id, f"a value leaves {self.dtype.name}'s range at [{r}, {c}] "
                                    f"({value}); {hint}", self.scenario.source)
        raise ScenarioError("trace", "a value leaves the dtype's range", self.scenario.source)


_presets: dict[tuple, Arithmetic] = {}   # resolved arithmetics, reused (they are immutable)


def _resolve(preset: str, overrides: dict) -> Arithmetic:
    """resolve(), remembered when the overrides are plain values (most runs: none at all)."""
    key = (preset, tuple(sorted(overrides.items())))
    try:
        return _presets[key]
    except TypeError:  # e.g. a mask given as a list of lists
        return resolve(preset, overrides)
    except KeyError:
        if len(_presets) >= 64:
            _presets.clear()
        arith = _presets[key] = resolve(preset, overrides)
        return arith


def _memory() -> tuple[int, int]:
    """(bytes of RAM, bytes available now)."""
    from .random_scenario import available_memory, physical_memory
    return physical_memory(), available_memory()


def _fits(need: int) -> bool:
    if need <= 1 << 26:  # small: never worth asking the OS
        return True
    ram, free = _memory()
    return need <= MEMORY_SHARE * ram and need <= 0.9 * free


def _refuse(trace: Trace, need: int) -> None:
    """A whole trace that would not fit in memory is refused before anything is allocated."""
    ram, free = _memory()
    raise ScenarioError("lazy", f"the whole trace needs about {need / 2**30:.1f} GiB, more than this machine "
                        f"can give it ({free / 2**30:.1f} GiB available of {ram / 2**30:.1f} GiB of RAM); "
                        "expected lazy=True (heads computed on demand, a few kept) or fewer tokens",
                        trace.scenario.source)


def run(scenario, arithmetic: str | None = None, *, lazy: bool | None = None, engine: str = "auto",
        **overrides) -> Trace:
    """Trace a scenario (a Scenario, a built-in name or a path) under a preset (`exact`,
    `by-hand`; default: the scenario's) with any arithmetic keys changed on top of it.

    lazy: None decides by size (EAGER_BYTES); True computes heads on demand, keeping a few;
    False computes everything now (refused, with the estimate, if it cannot fit).
    engine: "auto", "stages" (one kernel per step) or "fused" (large-scenario kernels)."""
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    if engine not in ("auto", "stages", "fused"):
        raise ScenarioError("engine", f"expected auto, stages or fused, got {engine!r}")
    try:
        arith = _resolve(arithmetic or scenario.preset, {**scenario.defaults, **overrides})
        layout = arith.layout or scenario.layout
        mask = scenario.mask if arith.mask is None else read_mask(arith.mask, scenario.n, layout)
    except ScenarioError as err:
        raise (err.at(scenario.source) if scenario.source else err) from None
    steps, by_id, cells = cached_plan(scenario, arith, layout, mask)
    trace = Trace(scenario, arith, layout, mask, steps, lazy=False, engine=engine, by_id=by_id)
    nbytes = cells * trace.dtype.itemsize
    if lazy is None:  # by size, and lazy anyway when the whole would not fit
        trace.lazy = nbytes > EAGER_BYTES or not _fits(nbytes)
    else:
        trace.lazy = bool(lazy)
        if not trace.lazy and not _fits(nbytes):
            _refuse(trace, nbytes)
    allowed = trace.allowed
    if allowed is not None and not allowed.any(axis=1).all():
        lonely = [scenario.tokens[i] for i in np.flatnonzero(~allowed.any(axis=1))]
        message = (f"{', '.join(lonely)}: every key is masked for this query, so its weights are all 0 "
                   "(as PyTorch's scaled_dot_product_attention does)")
        trace.warnings.append(message)
        warnings.warn(message, AttentionWarning, stacklevel=2)
    return trace if trace.lazy else trace.compute_all()


def _check_fits(scenario: Scenario, dtype: np.dtype) -> None:
    """Inputs too large for a narrower dtype are named as inputs, not as the step they break."""
    if dtype.itemsize >= 8:
        return
    largest = float(np.finfo(dtype).max)
    for field, biggest in scenario.largest.items():
        if biggest > largest:
            raise ScenarioError(field, f"a value ({biggest:.3g}) does not fit in {dtype.name} "
                                f"(largest {largest:.3g}); expected float64 (--set dtype=float64) or smaller inputs",
                                scenario.source)
