"""What a notebook shows of a trace or a scenario: the trace's HTML (tracer/html.py), one step
drawn as the SVG of `attnsim export --figure` (a Picture), and one-line reprs."""
from __future__ import annotations

from . import memory
from .errors import ScenarioError

DRAWN_CELL_BYTES = 80   # matplotlib's memory for each cell of a heatmap it draws (62–71 measured at 2000² to 3000²)


class Picture:
    """An SVG figure a notebook draws inline (`_repr_svg_`); `save(path)` writes it as SVG or PNG
    the way `tracer.figure` does."""

    def __init__(self, trace, steps, kind: str, blank: bool):
        from .figures import figure_svg
        self.trace, self.steps, self.kind, self.blank = trace, steps, kind, blank
        self.svg = figure_svg(trace, steps, kind, blank)

    def _repr_svg_(self) -> str:
        return self.svg

    def save(self, path):
        from .figures import write_figure
        return write_figure(self.trace, path, self.steps, kind=self.kind, blank=self.blank)

    def __repr__(self) -> str:
        from .figures import describe
        return f"<Picture: {describe(self.trace, self.steps, self.kind)}, {len(self.svg)} bytes of SVG>"


def show(trace, steps, figure: str, blank: bool) -> Picture:
    """`trace.show(...)`: the steps given by id (one id, or a list) as a Picture."""
    if isinstance(steps, str):
        steps = [steps]
    elif steps is not None:
        steps = list(steps)
        if not all(isinstance(s, str) for s in steps):
            raise ScenarioError("step", f"expected step ids like 'h0.weights', got {steps!r}"[:300])
    _refuse_huge(trace, steps, figure)
    return Picture(trace, steps, figure, blank)


def _refuse_huge(trace, steps, figure: str) -> None:
    """A picture of more cells than memory can draw is refused from the steps' sizes, before any
    is computed or drawn (a MemoryError from inside matplotlib otherwise)."""
    from .figures import MOST_HEADS, default_weights
    from .writing import selected_steps
    chosen = selected_steps(trace, steps) if steps else default_weights(trace, MOST_HEADS.get(figure, 1))
    cells = sum(s.shape[0] * s.shape[1] for s in chosen)
    need = cells * DRAWN_CELL_BYTES
    if not memory.fits(need):
        ids = ", ".join(s.id for s in chosen[:3]) + (", …" if len(chosen) > 3 else "")
        raise ScenarioError("step", f"drawing {ids} ({cells:,} cells) {memory.shortfall(need)}; expected a smaller "
                            "step or fewer steps (trace[id] gives the numbers without a picture)")


def trace_repr(trace) -> str:
    sc = trace.scenario
    computed = "" if not trace.lazy else ", computed head by head"
    return (f"<Trace {sc.name}: {sc.n} tokens, {sc.heads} head{'s' if sc.heads != 1 else ''}, {len(trace.steps)} steps, "
            f"arithmetic {trace.arithmetic.preset}, layout {trace.layout}{computed}>")


def scenario_repr(sc) -> str:
    grouped = f", {sc.groups} key/value groups" if sc.groups < sc.heads else ""
    if sc.mla is not None:   # d_k = nope + rope, the scale's width
        grouped = f", latent attention (rank {sc.mla['rank']}, {sc.mla['nope']} + {sc.mla['rope']} rotary)"
    mask = sc.mask if isinstance(sc.mask, str) else "given"
    return (f"<Scenario {sc.name}: {sc.n} tokens, d_model {sc.x.shape[1]}, {sc.heads} head{'s' if sc.heads != 1 else ''} "
            f"of d_k {sc.w_q.shape[2]}{grouped}, mask {mask}>")
