"""A linear layer's state for the token under the cursor (CONTRACT §16): what survived the decay,
what the token wrote and the state after it, side by side, with α, β, its key and value and, under
the delta rule, the prediction Sᵀk and the error v − Sᵀk. Stepping down the rows shows the state
being written token by token. Hidden on every other step."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from tracer.explain import cell as explain_cell
from tracer.ids import parse, step_id
from tracer.labels import token_name
from tracer.mechanisms.linear import keeps
from tracer.mechanisms.linear.steps import token_state


SHOWN = 6   # rows, columns and entries shown of a real layer's d_k × d_v state (128 × 128): the panel is
#            redrawn on every cursor move, and only its corner fits beside the matrix anyway


def _matrix(m, f) -> list[str]:
    cells = [[f(x) for x in row[:SHOWN]] + (["…"] if len(row) > SHOWN else []) for row in m[:SHOWN]]
    width = max(len(c) for row in cells for c in row)
    rows = ["[" + "  ".join(c.rjust(width) for c in row) + "]" for row in cells]
    return rows + ([f"({len(m)} × {len(m[0])}: the first {SHOWN} rows and columns)"] if len(m) > SHOWN else [])


def _vector(xs, f) -> str:
    return "(" + ", ".join([f(x) for x in xs[:SHOWN]] + (["…"] if len(xs) > SHOWN else [])) + ")"


def _side_by_side(blocks: list[tuple[str, list[str]]]) -> list[str]:
    widths = [max(len(title), *(len(r) for r in rows)) for title, rows in blocks]
    lines = ["   ".join(title.ljust(w) for (title, _), w in zip(blocks, widths))]
    for r in range(max(len(rows) for _, rows in blocks)):
        lines.append("   ".join((rows[r] if r < len(rows) else "").ljust(w) for (_, rows), w in zip(blocks, widths)))
    return lines


def token_of(trace, step, row: int, col: int) -> int | None:
    """The token whose state the cell belongs to (a state row's, a token row's, a query's), or None
    when the step is not one of a linear layer's head steps in a whole-layer trace."""
    ref = parse(step.id)
    if trace.scenario.linear is None or step.head is None or ref.token is not None or ref.prefill:
        return None
    i = col if trace.columns else row
    return i // trace.scenario.d_k if step.kind == "state" else i


class StatePanel(Static):
    def on_mount(self) -> None:
        self.display = False

    def show_for(self, trace, step, row: int, col: int) -> None:
        t = token_of(trace, step, row, col)
        self.display = t is not None
        if t is None:
            return
        d_k = trace.scenario.d_k
        cell = explain_cell(trace, step_id("state", step.head), *((0, t * d_k) if trace.columns else (t * d_k, 0)))
        got = token_state(cell, t)
        u, f = got["update"], cell.f
        name = token_name(trace.scenario.tokens, t)
        text = Text()
        text.append(f"state of head {step.head} after {name}\n", style="bold")
        lines = [f"α = {_vector(got['alpha'], f)}" + (f"   β = {f(got['beta'])}" if u.error is not None else ""),
                 f"k = {_vector(got['k'], f)}   v = {_vector(got['v'], f)}"]
        if u.error is not None:
            lines.append(f"prediction Sᵀk = {_vector(u.prediction, f)}   error v − Sᵀk = {_vector(u.error, f)}")
        blocks = [("decayed", _matrix(u.decayed, f)), ("+ write", _matrix(u.write, f)), (f"= S({name})", _matrix(u.state, f))]
        text.append("\n".join(lines + _side_by_side(blocks)).replace("-", "−"))
        text.append(f"\nkeeps: {keeps(trace.scenario).sentence(trace.scenario.n)}", style="dim")
        self.update(text)
