"""The main screen: the pipeline, the current step's matrix beside the matrices it came from, and
what the cursor's cell means; every change of scenario or arithmetic re-runs the tracer here."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen

import tracer
from tracer.ids import step_id
from tracer.labels import axis_title, step_labels
from tracer.step_notes import notes
from tracer.printing import fractions_for, tolerance
from tracer.mechanisms import chosen, dropped_cells

from ..commands import StepCommands
from ..messages import Compiling, GoTo
from ..session import (Session, axis_labels, scenario_label, carry_cell, cell_name, head_step_id, head_steps, input_panels,
                       other_head_panel, summary)
from ..widgets.answer import AnswerLine
from ..widgets.cell_info import CellInfo
from ..widgets.state import StatePanel
from ..widgets.fit import KeyBar
from ..widgets.heat import measure_ahead
from ..widgets.matrix import ROOM, MatrixView
from ..widgets.progress import Progress
from ..widgets.status import StatusBar
from ..widgets.step_info import StepInfo
from ..widgets.steps import StepList
from ..widgets.worksheet import Worksheet
from .dialogs import DialogsMixin
from .layout import FitMixin, Work
from .quizzing import QuizMixin
from .running import RunMixin
from .sheet import SheetMixin

PANELS = 4               # at most this many source matrices beside the current one (latent scores read 4)


class MainScreen(RunMixin, SheetMixin, FitMixin, QuizMixin, DialogsMixin, Screen):
    COMMANDS = {StepCommands}
    BINDINGS = [
        Binding("question_mark", "help", "help", key_display="?", tooltip="help: every key and what it does"),
        Binding("n", "step(1)", "next", tooltip="next step"),
        Binding("p", "step(-1)", "prev", tooltip="previous step"),
        Binding("a", "swap", "arithmetic",
                tooltip="swap the arithmetic preset (exact ↔ by-hand), same step and cell"),
        Binding("left_square_bracket", "head(-1)", "head", key_display="[", tooltip="previous head"),
        Binding("right_square_bracket", "head(1)", "head", key_display="]", tooltip="next head"),
        Binding("d", "diff", "diff", tooltip="diff view: this step under two arithmetics, side by side"),
        Binding("f", "fractions", "fractions",
                tooltip="numbers as exact fractions where they exist, or fixed decimals"),
        Binding("s", "settings", "settings", tooltip="each arithmetic key on its own: scale, base, normalize, "
                "stable, dtype, mask, layout"),
        Binding("t", "layout", "layout", tooltip="view the scenario in rows or columns layout"),
        Binding("o", "open", "open", tooltip="open a scenario: a built-in or a .toml file"),
        Binding("e", "export", "export", tooltip="export the trace: json, npz, csv, md (a worksheet), svg or png"),
        Binding("w", "worksheet", "worksheet", tooltip="worksheet: every matrix of this head on one sheet, "
                "the steps not reached yet blank"),
        Binding("z", "quiz", "quiz", tooltip="quiz: hide the computed cells; type a value, enter checks it"),
        Binding("c", "compare", "compare", show=False, tooltip="two heads side by side: the same step of the "
                "next head beside this one"),
        Binding("m", "heads", "heads", tooltip="heads overview: every head's weights at a glance; enter opens one"),
        Binding("M", "model", "model", tooltip="model view: every layer and head of the checkpoint, each layer's kind "
                "and memory, each head's role scores; enter opens one"),
        Binding("enter", "why", "why", show=False, tooltip="on an indexer's choice (idx.*): the head's weights there"),
        Binding("ctrl+r", "reveal", "reveal", show=False, tooltip="quiz: reveal the cell (counted as revealed)"),
        Binding("tab", "next_hidden", "next ?", show=False, tooltip="quiz: go to the next cell still to find"),
        Binding("g", "picture", "picture", show=False, tooltip="save this step as a picture (SVG) in the current "
                "folder; with the worksheet shown, the head's whole worksheet"),
    ]

    def __init__(self, spec=None, preset: str | None = None, overrides: dict | None = None,
                 quiz: list[str] | None = None, save=None) -> None:
        super().__init__()
        self.spec, self.preset, self.overrides = spec or "by_hand", preset, overrides or {}
        self.session: Session | None = None
        self.trace: tracer.Trace | None = None
        self.step_id, self.head, self.cell = "x", 0, (0, 0)
        self.fractions = True
        self.compare = False  # the same step of the next head beside this one
        self._loading = False  # a trace is being made: a compile notice belongs on screen only then
        self.sheet = False  # the worksheet instead of the step and its sources
        self._note = ""  # an error to keep on screen once the fallback scenario is open
        self.init_quiz(quiz, save)

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        with Horizontal(id="body"):
            yield StepList(id="steps")
            with Work(id="work"):
                with Horizontal(id="matrices"):
                    with Vertical(id="inputs"):
                        for n in range(PANELS):
                            yield MatrixView(id=f"in{n}", classes="source")
                    yield MatrixView(cursor=True, id="current")
                yield Worksheet(id="sheet")
                with VerticalScroll(id="info"):
                    yield CellInfo(id="cell")   # first: the cell's explanation is never scrolled away
                    yield StatePanel(id="state")   # a linear layer's state for the token under the cursor
                    yield Progress(id="progress")
                    yield StepInfo(id="about")
        yield AnswerLine(id="answer")
        yield KeyBar()

    def on_mount(self) -> None:
        for n in range(PANELS):
            self.query_one(f"#in{n}").display = False
        self.query_one("#sheet").display = self.query_one("#answer").display = False
        self.query_one("#current").focus()
        # numba says when a kernel really compiles (not on a cache hit); post_message is thread-safe
        tracer.on_compile(lambda text: self.post_message(Compiling(text)))
        spec, preset, overrides = self.spec, self.preset, self.overrides
        self.load(lambda: Session.open(spec, preset, overrides), fallback=True, what=f"opening {spec}")

    def on_unmount(self) -> None:
        tracer.on_compile(None)

    # ------------------------------------------------------------ drawing
    def show_step(self, step_id: str, cell: tuple[int, int] | None = None) -> None:
        trace = self.trace
        step = trace.step(step_id)
        self.head = step.head if step.head is not None else self.head
        self.step_id = step_id
        self.cell = carry_cell(cell or self.cell, step.shape, False)
        current = self.query_one("#current", MatrixView)
        axes = " × ".join(axis_title(axis, step.kind) for axis in step.axes)
        current.show(trace[step_id], *step_labels(trace, step, ROOM),
                     title=f"{step_id}  {axes}", fractions=self.written_fractions(),
                     tol=self._tol(), cursor=self.cell, hidden=self.hidden(step_id), dimmed=dropped_cells(trace, step))
        if self.sheet:
            self._fill_sheet()
        self.query_one(StepList).show(head_steps(trace, self.head), step_id, self.head, trace.heads)
        name, *rest = self._where()
        self.query_one(StatusBar).set_where(name, step_id, *rest)
        self.query_one(Progress).show(trace, step)
        self.query_one(StepInfo).show(step, axes, trace.warnings,
                                      trace.scenario if step.id == "x" else None, notes(trace, step),
                                      lesson=trace.scenario)
        self.show_cell(fit=False)
        self.fit()
        self._measure_ahead(step)

    def _measure_ahead(self, step) -> None:
        """The scales of what `n`, `p`, `[` and `]` would show next, measured in the background
        (a lazy trace's other heads are not computed for it)."""
        trace = self.trace
        ids = [s.id for s in head_steps(trace, self.head)]
        if trace.lazy or step.id not in ids:
            return
        index = ids.index(step.id)
        near = [ids[i] for i in (index + 1, index - 1) if 0 <= i < len(ids)]
        near += [head_step_id(trace, step, h) for h in (self.head + 1,) if h < trace.heads]
        arrays = [trace[sid] for sid in near]
        if index + 1 < len(ids):   # the next step's sources too: `n` is the key pressed most
            arrays += self.panel_arrays(trace, trace.step(ids[index + 1]))
        measure_ahead(arrays, self.written_fractions(), self._tol())

    def panel_arrays(self, trace, step) -> list:
        """The arrays of the panels beside `step` with the cursor's cell carried to it."""
        return [p.array for p in input_panels(trace, step, *carry_cell(self.cell, step.shape, False))]

    def _where(self) -> tuple[str, str, str, str]:
        trace = self.trace
        heads = f"head {self.head} of 0–{trace.heads - 1}" if trace.heads > 1 else ""
        return (scenario_label(trace.scenario), heads, self.session.label(),
                summary(trace.arithmetic, trace.scenario.d_k))

    def written_fractions(self, trace=None) -> bool:
        """Fractions on screen: asked for (f) and exact in the trace shown, or in `trace`
        (tracer.printing.fractions_for)."""
        return self.fractions and fractions_for(trace or self.trace)

    def _tol(self, trace=None) -> float:
        return tolerance((trace or self.trace).dtype)  # the tracer's: a few ulps of the dtype

    def show_cell(self, fit: bool = True) -> None:
        """The cursor's cell: its sources lit in their panels and its story; `fit`: the panels are
        fitted again when one was shown, hidden or changed (show_step fits them once, after)."""
        trace, step = self.trace, self.trace.step(self.step_id)
        panels = input_panels(trace, step, *self.cell)[:PANELS]
        other = other_head_panel(trace, step) if self.compare else None
        panels = panels[:PANELS - 1] + [other] if other is not None else panels
        redrawn = False  # a panel shown, hidden or changed: the layout is worked out again
        for n in range(PANELS):
            view = self.query_one(f"#in{n}", MatrixView)
            redrawn |= view.display != (n < len(panels))
            view.display = n < len(panels)
            if n >= len(panels):
                view.release()
                continue
            panel = panels[n]
            hidden = self.hidden(panel.title.split(" · ")[0])
            same = view.array is panel.array and view.full_title == panel.title
            if same and view.fractions == self.written_fractions():  # else redrawn: f changes every panel
                view.set_lit(panel.cells)
                view.set_hidden(hidden)
                view.reveal(*min(panel.cells, default=(0, 0)))
            else:
                redrawn = True
                view.show(panel.array, axis_labels(trace, panel.axes[0], panel.array.shape[0], width=ROOM[0]),
                          axis_labels(trace, panel.axes[1], panel.array.shape[1], width=ROOM[1]), title=panel.title,
                          fractions=self.written_fractions(), tol=self._tol(), lit=panel.cells, hidden=hidden)
        where = cell_name(trace, step, *self.cell)
        lit = [p.title.split(" · ")[0] for p in panels]
        if not self.quiz_cell_info(where, lit):
            story = trace.explain(self.step_id, *self.cell, fractions=self.fractions)
            self.query_one(CellInfo).show(where, story, lit)
            kept = chosen(trace, step, *self.cell)   # e.g. a lightning indexer's choice for the cursor's query
            if kept:
                self.query_one(StatusBar).say(kept)
            self.query_one(StatePanel).show_for(trace, step, *self.cell)
        else:   # a quiz: the state would give the answers away
            self.query_one(StatePanel).display = False
        if redrawn and fit:
            self.fit()

    def on_key(self, event) -> None:
        self.query_one(StatusBar).fade()   # before the key's action, which may say something new
        self.quiz_key(event)

    def action_why(self) -> None:
        """From the indexer's choice to what it did to the head: its weights, same query and key."""
        if self.quiz is None and self.trace is not None and self.step_id in ("idx.scores", "idx.selected"):
            row, col = self.cell
            if "entry" in self.trace.step(self.step_id).axes:   # entries are the keys after the n tokens (V4)
                n = self.trace.scenario.n
                row, col = (row + n, col) if self.trace.columns else (row, col + n)
            self.go(step_id("weights", self.head), (row, col))

    def on_matrix_view_cursor_moved(self, message: MatrixView.CursorMoved) -> None:
        if message.view is self.active_view() and self.trace is not None:
            self.cell = (message.row, message.col)
            self.show_cell()

    def on_step_list_chosen(self, message: StepList.Chosen) -> None:
        self.go(message.step_id)

    def on_go_to(self, message: GoTo) -> None:
        self.go(message.step_id)

    # ------------------------------------------------------------ actions
    def action_step(self, delta: int) -> None:
        if self.trace is None:
            return
        ids = [s.id for s in head_steps(self.trace, self.head)]
        index = ids.index(self.step_id) + delta
        if 0 <= index < len(ids):
            self.go(ids[index])
        else:
            self.notify("that was the last step" if delta > 0 else "this is the first step", timeout=2)

    def action_head(self, delta: int) -> None:
        if self.trace is None:
            return
        heads = self.trace.heads
        head = self.head + delta
        if not 0 <= head < heads:
            self.notify("this scenario has one head" if heads == 1 else f"heads are 0 to {heads - 1}", timeout=2)
            return
        step = self.trace.step(self.step_id)
        self.head = head
        self.go(head_step_id(self.trace, step, head))

    def action_swap(self) -> None:
        self.rerun(self.session.swapped())

    def action_layout(self) -> None:
        if self.trace is not None:
            self.set_option("layout", "rows" if self.trace.columns else "columns")

    def action_fractions(self) -> None:
        self.fractions = not self.fractions
        self.notify("exact fractions where they exist" if self.fractions else "fixed decimals", timeout=2)
        if self.trace is not None:
            self.show_step(self.step_id)

    def action_compare(self) -> None:
        if self.trace is not None and self.trace.heads < 2 and not self.compare:
            self.notify("this scenario has one head: there is no other head to put beside it", timeout=3)
            return
        self.compare = not self.compare
        self.notify("the same step of the next head beside this one" if self.compare else "the step's sources",
                    timeout=2)
        if self.trace is not None:
            self.show_step(self.step_id)
