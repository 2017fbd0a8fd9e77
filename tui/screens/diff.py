"""`d`: the current step under two arithmetics side by side (A: the one in force, B: another),
their per-cell difference A − B, and the queries whose most-attended key is not the same."""
from __future__ import annotations

import numpy as np
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from tracer.ids import step_id as make_id
from tracer.labels import keys_text, step_labels, top_keys
from tracer.printing import fractions_for, tolerance

from ..widgets.fit import KeyBar
from ..widgets.matrix import ROOM, MatrixView
from ..widgets.status import StatusBar

from ..session import Session, cell_name, head_steps

SHOWN_FLAGS = 6  # changed queries listed by name; the rest are counted


def top_keys_changed(wa: np.ndarray, wb: np.ndarray) -> list[tuple[int, list[int], list[int]]]:
    """(query, A's top keys, B's top keys) for each query whose most-attended keys differ
    between the two weight matrices (rows orientation: query × key)."""
    return [(i, ta, tb) for i, (ta, tb) in enumerate(zip(top_keys(wa), top_keys(wb))) if ta != tb]


def weights_id(trace, step_id: str, head: int) -> str | None:
    """The weights whose most-attended keys the diff flags for a step: its head's, or a linear
    layer's implicit weights; None where the trace records neither (an online trace keeps tiles, a
    decoding trace one row a token)."""
    step = trace.step(step_id)
    h = step.head if step.head is not None else head
    return next((sid for sid in (make_id("weights", h), make_id("implicit", h)) if sid in trace), None)


def difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A − B, with 0 where both are the same (two −∞ included)."""
    with np.errstate(invalid="ignore"):
        return np.where(a == b, 0.0, a.astype(np.float64) - b)


class DiffScreen(Screen[tuple | None]):
    BINDINGS = [
        Binding("escape,d", "close", "back"),
        Binding("n", "step(1)", "next step"),
        Binding("p", "step(-1)", "prev step"),
        Binding("left_square_bracket", "head(-1)", "prev head", key_display="["),
        Binding("right_square_bracket", "head(1)", "next head", key_display="]"),
        Binding("b", "other", "change B"),
        Binding("f", "fractions", "fractions/decimals"),
    ]

    def __init__(self, session: Session, trace, step_id: str, cell, fractions: bool) -> None:
        super().__init__()
        self.session, self.a, self.b = session, trace, None
        self.step_id, self.cell, self.fractions = step_id, cell, fractions
        self.head = trace.step(step_id).head or 0
        self.choices = [session.swapped()] + ([session.under(session.preset)] if session.overrides else [])
        self.choice = 0

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        with Horizontal(id="sides"):
            yield MatrixView(cursor=True, id="side-a")
            yield MatrixView(id="side-b")
            yield MatrixView(id="delta")
        with VerticalScroll(id="diff-info"):
            yield Static(id="flags")
            yield Static(id="cells")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#side-a").focus()
        self.run_b()

    def run_b(self) -> None:
        self.query_one(StatusBar).say(f"tracing B: {self.choices[self.choice].label()}…", "busy")
        self._run(self.choices[self.choice])

    @work(thread=True, exclusive=True)
    def _run(self, session: Session) -> None:
        try:
            b = session.run() if session is not None else self.b
            for trace in (self.a, b):  # fetch what is shown (lazy traces compute heads on demand)
                for sid in (self.step_id, weights_id(self.a, self.step_id, self.head)):  # the weights: for the flags
                    trace[sid] if sid is not None and sid in trace else None
        except Exception as err:  # noqa: BLE001
            self.app.call_from_thread(self.query_one(StatusBar).say, str(err).splitlines()[0], "error")
            return
        self.app.call_from_thread(self._ready, b)

    def _ready(self, b) -> None:
        self.b = b
        self.query_one(StatusBar).say("")
        self.show()

    # ------------------------------------------------------------ drawing
    def show(self) -> None:
        a, b = self.a, self.b
        step = a.step(self.step_id)
        self.cell = (min(self.cell[0], step.shape[0] - 1), min(self.cell[1], step.shape[1] - 1))
        label_a, label_b = self.session.label(), self.choices[self.choice].label()
        self.query_one(StatusBar).set_where(a.scenario.name, step.id, "diff", f"A {label_a}",
                                            f"B {label_b}")
        changed = self._flags(step)
        flagged = {i for i, _, _ in changed}
        rows, cols = step_labels(a, step, ROOM)
        rows, cols = _mark(rows, step.axes[0], flagged), _mark(cols, step.axes[1], flagged)
        common = dict(tol=tolerance(a.dtype))
        self.query_one("#side-a", MatrixView).show(a[step.id], rows, cols, title=f"A  {label_a}",
                                                   cursor=self.cell, fractions=self._written(a), **common)
        if step.id in b:
            self.query_one("#side-b", MatrixView).show(b[step.id], rows, cols, title=f"B  {label_b}",
                                                       lit=[self.cell], fractions=self._written(b), **common)
            self.query_one("#delta", MatrixView).show(difference(a[step.id], b[step.id]), rows, cols,
                                                      title="A − B", lit=[self.cell],
                                                      fractions=self._written(a) and self._written(b), **common)
        else:
            for view in ("#side-b", "#delta"):
                self.query_one(view, MatrixView).show(np.zeros((0, 0)), [], [], title=f"{step.id}: not in B")
        self._cells()
        self.fit()

    def fit(self) -> None:
        """The three panels in one row when they fit whole, else A and B above A − B (each as
        tall as its numbers need); the rest of the screen goes to the notes below. Too large
        for either: equal shares of the whole area, with cut signs."""
        sides = self.query_one("#sides")
        views = list(self.query("#sides MatrixView").results(MatrixView))
        wants = [v.natural() for v in views]
        width, room = self.size.width, max(6, self.size.height - 8)
        tallest = max(w.height for w in wants)
        views[-1].styles.column_span = 1
        if sum(w.width for w in wants) <= width and tallest <= room:
            sides.styles.layout, sides.styles.height = "horizontal", tallest
            for view, want in zip(views, wants):
                view.styles.width = want.width
        elif 2 * tallest <= room:
            sides.styles.layout, sides.styles.height = "grid", 2 * tallest
            sides.styles.grid_size_columns, sides.styles.grid_size_rows = 2, 2
            for view in views:
                view.styles.width = "1fr"
            views[-1].styles.column_span = 2   # A − B under both: its wider numbers are never cut
        else:
            sides.styles.layout, sides.styles.height = "horizontal", "1fr"
            for view in views:
                view.styles.width = "1fr"

    def on_resize(self) -> None:
        if self.b is not None:
            self.fit()

    def _flags(self, step) -> list:
        text = Text()
        wid = weights_id(self.a, step.id, self.head)
        if wid is None or wid not in self.b:
            self.query_one("#flags", Static).update(Text("no attention weights recorded here: no query's most-attended "
                                                          "key to compare", style="dim"))
            return []
        changed = top_keys_changed(self.a.rows(wid), self.b.rows(wid))
        tokens = self.a.scenario.tokens
        if not changed:
            text.append(f"{wid}: every query's most-attended key is the same under A and B", style="green")
        else:
            text.append(f"⚑ {len(changed)} of {len(tokens)} queries change their most-attended key ({wid}):",
                        style="bold yellow")
            for i, ka, kb in changed[:SHOWN_FLAGS]:
                keys = self.a.scenario.key_tokens
                text.append(f"\n  query {tokens[i]}: {_keys(keys, ka)} under A, {_keys(keys, kb)} under B")
            if len(changed) > SHOWN_FLAGS:
                text.append(f"\n  … and {len(changed) - SHOWN_FLAGS} more")
        self.query_one("#flags", Static).update(text)
        return changed

    def _cells(self) -> None:
        a, b, (r, c) = self.a, self.b, self.cell
        step = a.step(self.step_id)
        text = Text()
        text.append("cell ", style="dim").append(cell_name(a, step, r, c), style="bold")
        text.append("\nA: " + a.explain(step.id, r, c, fractions=self.fractions), style="green")
        if step.id in b:
            text.append("\nB: " + b.explain(step.id, r, c, fractions=self.fractions), style="cyan")
        self.query_one("#cells", Static).update(text)

    def on_matrix_view_cursor_moved(self, message: MatrixView.CursorMoved) -> None:
        if self.b is None:
            return
        self.cell = (message.row, message.col)
        for view in ("#side-b", "#delta"):
            self.query_one(view, MatrixView).set_lit([self.cell])
            self.query_one(view, MatrixView).reveal(*self.cell)
        self._cells()

    # ------------------------------------------------------------ actions
    def action_step(self, delta: int) -> None:
        ids = [s.id for s in head_steps(self.a, self.head)]
        index = ids.index(self.step_id) + delta
        if self.b is not None and 0 <= index < len(ids):
            self.step_id = ids[index]
            self.show()

    def action_head(self, delta: int) -> None:
        step = self.a.step(self.step_id)
        if self.b is not None and 0 <= self.head + delta < self.a.heads:
            self.head += delta
            self.step_id = step.id if step.head is None else make_id(step.kind, self.head)
            self._run(None) if self.a.lazy or self.b.lazy else self.show()

    def action_other(self) -> None:
        if len(self.choices) == 1:
            self.notify("B is the other preset; with settings changed, B can also be the preset without them")
            return
        self.choice = (self.choice + 1) % len(self.choices)
        self.run_b()

    def _written(self, trace) -> bool:
        return self.fractions and fractions_for(trace)

    def action_fractions(self) -> None:
        self.fractions = not self.fractions
        if self.b is not None:
            self.show()

    def action_close(self) -> None:
        self.dismiss((self.step_id, self.cell))


def _keys(tokens: list[str], keys: list[int]) -> str:
    return ("key " if len(keys) == 1 else "keys ") + keys_text(tokens, keys)


def _mark(labels: list[str], axis: str, flagged: set[int]) -> list[str]:
    """Queries whose top key changed get a ⚑ on their label."""
    if axis != "query":
        return labels
    return [f"⚑{name}" if i in flagged else name for i, name in enumerate(labels)]
