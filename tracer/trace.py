"""The tracer: runs the kernels in order and records every step once, under its id.

`run()` resolves the arithmetic, plans the steps (ids, formulas, axes, shapes) and computes
them, all at once for small scenarios, one head at a time on demand for large ones, so that a
GPT-3-size layer never holds more than a head's intermediates.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict

import numpy as np

from . import kernels as K
from .arithmetic import Arithmetic, resolve
from .errors import AttentionWarning, ScenarioError
from .scenario import Scenario, load_scenario, read_mask
from .steps import KINDS, Step, formula

EAGER_BYTES = 1 << 30   # traces up to this size are computed whole; larger ones per head on demand
RESIDENT_HEADS = 2      # heads whose full intermediates a lazy trace keeps at once


class Trace:
    """Every intermediate of one run: `trace[id]` is the array (in the trace's layout),
    `trace.steps` the steps in computation order, `trace.explain(id, row, col)` one cell's story."""

    def __init__(self, scenario: Scenario, arithmetic: Arithmetic, layout: str, allowed, steps, lazy: bool):
        self.scenario, self.arithmetic, self.layout = scenario, arithmetic, layout
        self.allowed = allowed                  # query × key, bool, or None when nothing is masked
        self.steps: list[Step] = steps
        self.lazy = lazy
        self.warnings: list[str] = []
        self.dtype = np.dtype(arithmetic.dtype)
        self._by_id = {s.id: s for s in steps}
        self._data: dict[str, np.ndarray] = {}
        self._resident: OrderedDict[int, None] = OrderedDict()
        self._x = np.ascontiguousarray(scenario.x, dtype=self.dtype)
        self._record("x", self._x)

    # ------------------------------------------------------------ reading
    @property
    def columns(self) -> bool:
        return self.layout == "columns"

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
        for h in range(self.heads):
            self._head(h)
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
        if p + "scores" in self._data:
            self._resident.move_to_end(h, last=True) if h in self._resident else None
            return self.rows(p + "z")
        sc, a, dt = self.scenario, self.arithmetic, self.dtype
        weight = lambda m: np.ascontiguousarray(m[h], dtype=dt)  # noqa: E731
        x = self._x
        q = self._record(p + "q", K.project(x, weight(sc.w_q)))
        k = self._record(p + "k", K.project(x, weight(sc.w_k)))
        if sc.w_v_down is not None:
            v = K.project(self._record(p + "v_down", K.project(x, weight(sc.w_v_down))), weight(sc.w_v_up))
        else:
            v = K.project(x, weight(sc.w_v))
        self._record(p + "v", v)
        s = self._record(p + "scores", K.scores(q, k))
        c = a.scale_divisor(sc.d_k)
        if c is None:
            scaled = s  # same values: recorded under its id without a copy
        else:
            scaled = (K.floor_divide if a.scale == "floor" else K.divide)(s, c)
        m = self._record(p + "scaled", scaled)
        if self.allowed is not None:
            m = self._record(p + "masked", K.mask(m, self.allowed))
        if a.normalize == "softmax":
            shift = K.row_max(m) if a.stable else np.zeros((m.shape[0], 1), dtype=dt)
            e = (K.exp_powers(m, shift) if a.softmax_base == "e" else K.base_powers(m, shift, a.base))
            self._record(p + "exp", e)
            sums = self._record(p + "sums", K.row_sums(e))
            weights = self._record(p + "weights", K.softmax_weights(e, sums))
        else:
            weights = self._record(p + "weights", K.relu_weights(m))
        z = self._record(p + "z", K.weighted_sum(weights, v))
        if not np.isfinite(z).all():
            self._overflow([s for s in self.steps if s.head == h])
        self._resident[h] = None
        if self.lazy:
            while len(self._resident) > RESIDENT_HEADS:
                old, _ = self._resident.popitem(last=False)
                for s in self.steps:  # keep the small z: the tail needs every head's
                    if s.head == old and s.kind != "z":
                        self._data.pop(s.id, None)
        return z

    def _tail(self) -> None:
        sc = self.scenario
        zs = [self._head(h) for h in range(self.heads)]
        y = zs[0]
        if self.heads > 1:
            y = self._record("concat", K.concat(np.stack(zs)))
        if sc.w_o is not None:
            y = self._record("out", K.project(y, np.ascontiguousarray(sc.w_o, dtype=self.dtype)))
        if sc.residual:
            y = self._record("residual", K.add(self._x, y))
            if sc.residual["norm"] == "layer":
                y = self._record("norm", K.layer_norm(y, sc.residual["eps"]))
        if not np.isfinite(y).all():
            self._overflow([s for s in self.steps if s.head is None and s.id != "x"])

    def _overflow(self, steps: list[Step]):
        """Names the first step whose values left the dtype's range (never a silent inf/NaN)."""
        for step in steps:
            a = self.rows(step.id)
            bad = np.isnan(a) | (a == np.inf) | ((a == -np.inf) & (step.kind != "masked"))
            if bad.any():
                r, c = np.argwhere(bad)[0]
                if self.columns:
                    r, c = c, r
                hint = ("raw powers overflow: set stable=true (subtract each query's max first) or scale the "
                        "scores down" if step.kind == "exp" else "expected inputs small enough for this dtype")
                raise ScenarioError(step.id, f"a value leaves {self.dtype.name}'s range at [{r}, {c}] "
                                    f"({a.T[c, r] if self.columns else a[r, c]}); {hint}", self.scenario.source)
        raise ScenarioError("trace", "a value leaves the dtype's range", self.scenario.source)


def plan(scenario: Scenario, arithmetic: Arithmetic, layout: str, mask) -> list[Step]:
    """The steps a run records, in computation order, with formulas, inputs, axes and shapes."""
    sc, columns = scenario, layout == "columns"
    masked = not (isinstance(mask, str) and mask == "none")
    dims = dict(token=sc.n, query=sc.n, key=sc.n, d_model=sc.d_model, d_k=sc.d_k, d_v=sc.d_v,
                d_out=sc.d_out, one=1, rank=sc.rank or 0)
    steps = []

    def add(step_id, kind, head, inputs, text=None, axes=None):
        axes = axes or KINDS[kind][1]
        shape = (dims[axes[0]], dims[axes[1]])
        if kind == "concat":
            shape = (sc.n, sc.heads * sc.d_v)
        if columns:
            axes, shape = axes[::-1], shape[::-1]
        text = text or formula(kind, columns, arithmetic, sc.d_k, mask, sc.heads)
        steps.append(Step(step_id, kind, head, text, tuple(inputs), tuple(axes), tuple(shape)))

    add("x", "x", None, (), "X: one column per token" if columns else "X: one row per token")
    for h in range(sc.heads):
        p = f"h{h}."
        add(p + "q", "q", h, ["x"])
        add(p + "k", "k", h, ["x"])
        if sc.rank is not None:
            add(p + "v_down", "v_down", h, ["x"])
            add(p + "v", "v", h, [p + "v_down"], "V = W_V↑·V↓" if columns else "V = V↓·W_V↑")
        else:
            add(p + "v", "v", h, ["x"], "V = W_V·X" if columns else "V = X·W_V")
        add(p + "scores", "scores", h, [p + "q", p + "k"])
        add(p + "scaled", "scaled", h, [p + "scores"])
        last = p + "scaled"
        if masked:
            add(p + "masked", "masked", h, [last])
            last = p + "masked"
        if arithmetic.normalize == "softmax":
            add(p + "exp", "exp", h, [last])
            add(p + "sums", "sums", h, [p + "exp"])
            add(p + "weights", "weights", h, [p + "exp", p + "sums"])
        else:
            add(p + "weights", "weights", h, [last])
        add(p + "z", "z", h, [p + "weights", p + "v"])
    last = "h0.z"
    if sc.heads > 1:
        add("concat", "concat", None, [f"h{h}.z" for h in range(sc.heads)])
        last = "concat"
    if sc.w_o is not None:
        y = "concat" if sc.heads > 1 else "Z"
        add("out", "out", None, [last], f"O = W_O·{y}" if columns else f"O = {y}·W_O")
        last = "out"
    if sc.residual:
        add("residual", "residual", None, ["x", last], "R = X + " + {"out": "O", "concat": "concat"}.get(last, "Z"))
        if sc.residual["norm"] == "layer":
            add("norm", "norm", None, ["residual"])
    return steps


def allowed_matrix(mask, n: int) -> np.ndarray | None:
    """query × key booleans (True = may attend), or None when nothing is masked."""
    if isinstance(mask, str):
        return None if mask == "none" else np.tri(n, dtype=np.bool_)
    return np.ascontiguousarray(mask, dtype=np.bool_)


def run(scenario, arithmetic: str | None = None, *, lazy: bool | None = None, **overrides) -> Trace:
    """Trace a scenario (a Scenario, a built-in name or a path) under a preset (`exact`,
    `by-hand`; default: the scenario's) with any arithmetic keys changed on top of it."""
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    try:
        arith = resolve(arithmetic or scenario.preset, {**scenario.defaults, **overrides})
        layout = arith.layout or scenario.layout
        mask = scenario.mask if arith.mask is None else read_mask(arith.mask, scenario.n, layout)
    except ScenarioError as err:
        raise (err.at(scenario.source) if scenario.source else err) from None
    allowed = allowed_matrix(mask, scenario.n)
    steps = plan(scenario, arith, layout, mask)
    trace = Trace(scenario, arith, layout, allowed, steps, lazy=False)
    trace.lazy = trace.nbytes() > EAGER_BYTES if lazy is None else lazy
    if allowed is not None and not allowed.any(axis=1).all():
        lonely = [scenario.tokens[i] for i in np.flatnonzero(~allowed.any(axis=1))]
        message = (f"{', '.join(lonely)}: every key is masked for this query, so its weights are all 0 "
                   "(as PyTorch's scaled_dot_product_attention does)")
        trace.warnings.append(message)
        warnings.warn(message, AttentionWarning, stacklevel=2)
    return trace if trace.lazy else trace.compute_all()
