"""One cell's story: which numbers it came from and the arithmetic that made it, as text
(`scores[k2, q3] = k2·q3 = 2×0 + 1×1 + 0×2 = 1`), and the cells it came from, for highlighting.
Each kind tells its own story (tracer/steps); this module finds the cell and writes its numbers."""
from __future__ import annotations

from .errors import ScenarioError
from .printing import fmt, fmt_approx, fractions_for, rational, tolerance
from .steps import Cell


__all__ = ["cell", "explain", "rational", "sources"]


def cell(trace, step_id: str, row: int, col: int, fractions: bool = True) -> Cell:
    """The cell at (row, col) of a step, in the trace's layout; refused when out of range."""
    step = trace.step(step_id)
    rows, cols = step.shape
    if not (0 <= row < rows and 0 <= col < cols):
        raise ScenarioError("cell", f"expected row < {rows} and column < {cols} for {step_id}, got ({row}, {col})")
    i, j = (col, row) if trace.columns else (row, col)
    tol = tolerance(trace.dtype)
    fractions = fractions and fractions_for(trace)
    return Cell(trace, step, i, j, lambda v: fmt(v, fractions, tol=tol), lambda v: fmt_approx(v, fractions, tol=tol))


def explain(trace, step_id: str, row: int, col: int, fractions: bool = True) -> str:
    c = cell(trace, step_id, row, col, fractions)
    return f"{c.label()} {c.step.spec.explain(c)}"


def sources(trace, step_id: str, row: int, col: int) -> dict[str, list[tuple[int, int]]]:
    """The cells each input step contributed to one cell, in the layout's (row, col)."""
    c = cell(trace, step_id, row, col)
    found = c.step.spec.sources(c)
    if trace.columns:
        return {sid: [(b, a) for a, b in cells] for sid, cells in found.items()}
    return {sid: list(cells) for sid, cells in found.items()}
