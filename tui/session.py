"""What the screens show, without any drawing: the scenario, the arithmetic chosen (a preset plus
per-key overrides), and how the step, head and cell carry over when the trace is re-run."""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace

import tracer
from tracer.arithmetic import PRESETS, resolve
from tracer.given_inputs import factor
from tracer.steps import KINDS
from tracer.labels import TOKEN_AXES, axis_labels, step_labels  # noqa: F401  (the screens take axis_labels from here)

# Steps in pipeline order (the registry's, as ids write the kinds): when a re-run drops a step (relu
# has no exp), the nearest one is shown.
KIND_ORDER = tuple(dict.fromkeys(KINDS[name].word for name in KINDS))
VIEW_KEYS = ("mask", "layout")  # how the scenario is viewed; kept when the preset is swapped


@dataclass
class Session:
    """A scenario and the arithmetic to run it in; `run()` gives the trace."""
    scenario: tracer.Scenario
    preset: str
    overrides: dict = field(default_factory=dict)

    @classmethod
    def open(cls, spec, preset: str | None = None, overrides: dict | None = None) -> "Session":
        """Loads a scenario (name, path or Scenario) and checks the arithmetic before any run."""
        scenario = spec if isinstance(spec, tracer.Scenario) else tracer.load_scenario(spec)
        session = cls(scenario, preset or scenario.preset, dict(overrides or {}))
        session.arithmetic()  # raises ScenarioError on a bad preset or value
        return session

    def arithmetic(self) -> tracer.Arithmetic:
        return resolve(self.preset, {**self.scenario.defaults, **self.overrides})

    def run(self, lazy: bool | None = None) -> tracer.Trace:
        """The trace; lazy=True plans it only (each head computed when first asked for)."""
        with warnings.catch_warnings():  # the UI shows trace.warnings itself
            warnings.simplefilter("ignore", tracer.AttentionWarning)
            return tracer.run(self.scenario, self.preset, lazy=lazy, **self.overrides)

    def layers(self, trace) -> tuple[list[tuple[str, object]], int]:
        """The heads overview's layers: for a real model's layer, every layer of the model (each
        built on demand, under the same arithmetic: a callable); else this trace alone."""
        model = trace.scenario.model
        if not model or model["path"] is None:   # no folder to build the others from (a model in memory)
            return [("this layer", trace)], 0

        def build(layer: int):
            sc = tracer.from_model(model["path"], model["text"], layer, heads=model["heads"])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", tracer.AttentionWarning)
                return tracer.run(sc, self.preset, **self.overrides)
        kinds = model.get("kinds") or [""] * model["layers"]
        return ([(f"layer {n} of {model['layers']}" + (f": {kinds[n]}" if kinds[n] else ""),
                  trace if n == model["layer"] else (lambda n=n: build(n))) for n in range(model["layers"])],
                model["layer"])

    def under(self, preset: str) -> "Session":
        """Another preset; per-key arithmetic overrides are dropped, the view (mask, layout) kept."""
        kept = {k: v for k, v in self.overrides.items() if k in VIEW_KEYS}
        return replace(self, preset=preset, overrides=kept)

    def swapped(self) -> "Session":
        return self.under(other_preset(self.preset))

    def with_option(self, key: str, value) -> "Session":
        """One key set; a value that is the preset's (or the scenario's) own is no override, so the
        top bar never names it (`t t` leaves no `layout=columns`)."""
        overrides = {**self.overrides, key: value}
        try:
            if self._own(key, overrides):
                del overrides[key]
        except tracer.ScenarioError:   # a bad value: the run that follows names it
            pass
        return replace(self, overrides=overrides)

    def _named_own(self, key: str) -> bool:
        """Whether an override (from --set too) only repeats the preset's or the scenario's own value."""
        try:
            return key in self.overrides and self._own(key, self.overrides)
        except tracer.ScenarioError:
            return False

    def _own(self, key: str, overrides: dict) -> bool:
        sc = self.scenario
        if key in VIEW_KEYS:
            own = sc.layout if key == "layout" else ("none" if sc.mask is None else sc.mask)
            return isinstance(own, str) and overrides[key] == own
        without = {k: v for k, v in overrides.items() if k != key}
        made = [resolve(self.preset, {**sc.defaults, **o}) for o in (without, overrides)]
        return getattr(made[0], key) == getattr(made[1], key)

    def cells(self) -> int:
        """How many numbers one head's query × key steps hold: the cost of a re-run."""
        return self.scenario.n * self.scenario.n * self.scenario.heads

    def label(self) -> str:
        """The arithmetic in force, e.g. `by-hand` or `by-hand + scale=sqrt`."""
        extra = ", ".join(f"{k}={_show(v)}" for k, v in self.overrides.items() if not self._named_own(k))
        return f"{self.preset} + {extra}" if extra else self.preset


def scenario_label(scenario) -> str:
    """The scenario's name for the top bar; a checkpoint's layer adds which layer and its kind
    (sliding or global, its positions), as the heads overview names them."""
    model = scenario.model
    if not model or not model.get("kind"):
        return scenario.name
    return f"{scenario.name} ({model['kind']})"


def run_kind(session: Session) -> tuple:
    """What decides which kernels a run needs (dtype, variants, layout, mask), not the numbers."""
    a, sc = session.arithmetic(), session.scenario
    scale = a.scale if isinstance(a.scale, str) else "number"
    mask = a.mask if a.mask is None or isinstance(a.mask, str) else "matrix"
    return (a.dtype, a.normalize, a.softmax_base == "e", a.stable, scale, a.layout or sc.layout,
            mask, str(sc.mask) if isinstance(sc.mask, str) else "matrix", sc.x.dtype.str, sc.heads > 1)


def one_line(err: Exception) -> str:
    """An error as the status line shows it: a scenario error as is, anything else with its type."""
    text = str(err).strip().splitlines()
    first = text[0] if text else ""
    return first if isinstance(err, tracer.ScenarioError) else f"{type(err).__name__}: {first}"


def other_preset(preset: str) -> str:
    names = list(PRESETS)
    return names[(names.index(preset) + 1) % len(names)] if preset in names else names[0]


def _show(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    return value if isinstance(value, str) else "matrix"


def summary(arithmetic: tracer.Arithmetic, d_k: int) -> str:
    """The arithmetic in a few symbols: `⌊÷2⌋, 3^s, raw powers`."""
    c = arithmetic.scale_divisor(d_k)   # None under scale=none: formatted only where it is a number
    if arithmetic.scale == "none":
        scale = "unscaled"
    elif arithmetic.scale == "sqrt":
        scale = f"÷√{d_k}"
    else:
        scale = f"⌊÷{c:g}⌋" if arithmetic.scale == "floor" else f"÷{c:g}"
    if arithmetic.normalize == "relu":
        norm = "relu"
    else:
        base = "e" if arithmetic.softmax_base == "e" else f"{arithmetic.base:g}"
        norm = f"{base}^s, " + ("max subtracted" if arithmetic.stable else "raw powers")
    parts = [scale, norm] + ([arithmetic.dtype] if arithmetic.dtype != "float64" else [])
    return ", ".join(parts)


# ---------------------------------------------------------------- moving around a trace

def head_steps(trace: tracer.Trace, head: int) -> list[tracer.Step]:
    """The pipeline as one head sees it: the shared steps, the keys and values of the group it
    reads (not the other groups'), and its own steps."""
    group = trace.group_of(head) if trace.heads > head >= 0 else None
    return [s for s in trace.steps
            if (s.head is None and (s.group is None or s.group == group)) or s.head == head]


def head_step_id(trace: tracer.Trace, step: tracer.Step, head: int) -> str:
    """The same step as query head `head` sees it: its own, or the keys and values of its group."""
    from dataclasses import replace
    from tracer.ids import parse
    ref = parse(step.id)
    if step.head is not None:
        return ref.with_kind(step.kind, head)
    if step.group is not None:
        return replace(ref, group=trace.group_of(head)).with_kind(step.kind, None)
    return step.id


def nearest_step(trace: tracer.Trace, step_id: str, kind: str, head: int) -> str:
    """step_id if the trace has it, otherwise the step of this head closest in pipeline order."""
    if step_id in trace:
        return step_id
    rank = KIND_ORDER.index(kind) if kind in KIND_ORDER else 0
    steps = head_steps(trace, min(head, trace.heads - 1))
    # the closest rank wins; on a tie, the later step (exp gone: weights rather than scaled)
    order = lambda s: KIND_ORDER.index(s.kind) if s.kind in KIND_ORDER else rank  # noqa: E731
    return min(steps, key=lambda s: (abs(order(s) - rank), -order(s))).id


def carry_cell(cell: tuple[int, int], shape: tuple[int, int], transposed: bool) -> tuple[int, int]:
    """The same cell in a re-run: transposed when the layout flipped, kept inside the shape."""
    r, c = (cell[1], cell[0]) if transposed else cell
    return min(max(r, 0), shape[0] - 1), min(max(c, 0), shape[1] - 1)


def cell_name(trace: tracer.Trace, step: tracer.Step, row: int, col: int) -> str:
    """`key x2, query x1` or `d_k 0, token x3`: a cell named by its axes (a key by the key tokens:
    the context's under cross-attention; a repeated token with its index, `la#3`)."""
    labels = step_labels(trace, step)
    names = [f"{axis} {named[i] if axis in TOKEN_AXES else i}"
             for axis, named, i in zip(step.axes, labels, (row, col)) if axis != "one"]
    return ", ".join(names)


# ---------------------------------------------------------------- what a cell came from

@dataclass
class Panel:
    """One matrix shown beside the current step, with the cells that fed the cursor's cell."""
    title: str
    array: object
    axes: tuple[str, str]
    cells: list[tuple[int, int]]


def input_panels(trace: tracer.Trace, step: tracer.Step, row: int, col: int) -> list[Panel]:
    """The matrices the current cell was computed from, in the trace's layout, sources lit."""
    panels = []
    for sid, cells in trace.sources(step.id, row, col).items():
        src = trace.step(sid)
        panels.append(Panel(f"{sid} · {src.formula}", trace[sid], src.axes, cells))
    weight = factor(trace, step)   # W_Q, or latent attention's W_DKV, W_UK, …
    if weight is not None:
        name, w = weight
        # rows: cell (i, j) uses W's column j; columns: cell (j, i) uses W's row j
        cells = ([(row, m) for m in range(w.shape[1])] if trace.columns
                 else [(m, col) for m in range(w.shape[0])])
        axes = ("out", "in") if trace.columns else ("in", "out")
        panels.append(Panel(name, w, axes, cells))
    return panels


def other_head_panel(trace: tracer.Trace, step: tracer.Step) -> Panel | None:
    """The same step of the next head, to compare two heads side by side (`c`); None for a step
    shared by the heads, a one-head scenario, or a lazy trace (the other head would compute here)."""
    if step.head is None or trace.heads < 2 or trace.lazy:
        return None
    from tracer.ids import parse
    other = parse(step.id).with_kind(step.kind, (step.head + 1) % trace.heads)
    if other not in trace:
        return None
    return Panel(f"{other} · the same step of head {(step.head + 1) % trace.heads}", trace[other],
                 trace.step(other).axes, [])
