"""The main screen's worksheet (w): every matrix of the head on one sheet in place of the step and
its sources, the steps not reached yet blank, the step under the cursor followed as it moves."""
from __future__ import annotations

from ..widgets.matrix import MatrixView
from ..widgets.status import StatusBar
from ..widgets.worksheet import Worksheet, blanks


class SheetMixin:
    """Mixed into MainScreen (which owns trace, head, step_id, cell, sheet, show_step, show_cell)."""

    def active_view(self) -> MatrixView:
        """The view whose cursor is the current cell: the step's panel on the worksheet."""
        view = self.query_one(Worksheet).views.get(self.step_id) if self.sheet else None
        return view or self.query_one("#current", MatrixView)

    def _fill_sheet(self) -> None:
        trace = self.trace
        masks = self.quiz_masks(trace.steps) if self.quiz else blanks(trace, self.head, self.step_id)
        self.query_one(Worksheet).build(trace, self.head, self.step_id, masks, self.written_fractions(), self._tol(),
                                        self.cell)

    def action_worksheet(self) -> None:
        if self.trace is None:
            return
        self.sheet = not self.sheet
        self.query_one("#matrices").display = not self.sheet
        self.query_one(Worksheet).display = self.sheet
        self.query_one("#work").set_class(self.sheet, "-sheet")
        self.notify("worksheet: n fills the next step; tab moves between matrices" if self.sheet
                    else "the step and its sources", timeout=3)
        self.show_step(self.step_id)
        if not self.sheet and not self.answering():
            self.query_one("#current").focus()

    def on_worksheet_picked(self, message: Worksheet.Picked) -> None:
        if self.trace is None or message.step_id == self.step_id:
            return
        step = self.trace.step(message.step_id)
        self.step_id, self.cell = message.step_id, self.active_view().cursor
        self.head = step.head if step.head is not None else self.head
        name, *rest = self._where()
        self.query_one(StatusBar).set_where(name, self.step_id, *rest)
        self.show_cell()
