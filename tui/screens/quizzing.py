"""The main screen's quiz mode: hidden cells, the answer line, ✓ / ✗ with hints on the status line,
the next step opening when one is done; the rules themselves live in tui/quiz.py."""
from __future__ import annotations

import numpy as np

import tracer

from ..quiz import Quiz, quiz_steps
from ..widgets.answer import AnswerLine
from ..widgets.cell_info import CellInfo
from ..widgets.matrix import MatrixView
from ..widgets.status import StatusBar

ANSWER_START = set("0123456789+-−.,/∞")   # a key that can only begin an answer opens the answer line


class QuizMixin:
    """Mixed into MainScreen (which owns trace, step_id, cell, show_step, go, active_view)."""

    def init_quiz(self, steps: list[str] | None, save=None) -> None:
        self.quiz: Quiz | None = None
        self._asked = steps          # None: no quiz; [] every computed step; else these ids
        self._hints: dict = {}       # (step, row, col) → the last hint given there
        self._save = save            # a QuizSave (--save FILE): answers written as they are judged

    def hidden(self, step_id: str) -> np.ndarray | None:
        return self.quiz.hidden(step_id) if self.quiz is not None else None

    def answering(self) -> bool:
        return self.quiz is not None and self.query_one(AnswerLine).active

    def quiz_loaded(self, old, step_id: str, cell):
        """On every new trace: start the quiz asked for, or carry it over to the re-run."""
        trace = self.trace
        if self.quiz is not None and old is not None and old.scenario is trace.scenario:
            self.quiz.rerun(trace)
            return step_id, cell
        if self._asked is None:
            return step_id, cell
        try:
            self.quiz = Quiz(trace, quiz_steps(trace, self._asked))
        except tracer.ScenarioError as err:
            self.quiz, self._asked = None, None
            self.query_one(StatusBar).say(str(err), "error")
            return step_id, cell
        self._asked, self._hints = [], {}   # another scenario opened later gets the whole quiz
        self._answer_line(True)
        resumed = self._save.restore(self.quiz) if self._save and self._save.answers(trace.scenario) else 0
        first = self.quiz.first_open()
        steps = len(self.quiz.steps)
        self.query_one(StatusBar).say(f"quiz resumed from {self._save.path}: {resumed} cell{'s' * (resumed != 1)} "
                                      "answered before" if resumed else
                                      f"quiz: {steps} step{'s' * (steps != 1)} to fill; type a value, "
                                      "enter checks it", "busy")
        return (first, self.quiz.first_hidden_cell(first)) if first else (step_id, cell)

    def quiz_masks(self, steps) -> dict:
        return {s.id: (self.quiz.hidden(s.id), "?") for s in steps}

    def quiz_cell_info(self, where: str, lit: list[str]) -> bool:
        """Writes the cell panel for a hidden cell (the question, the last hint); False otherwise."""
        if self.quiz is None or not self.quiz.is_hidden(self.step_id, *self.cell):
            return False
        clue = self._hints.get((self.step_id, *self.cell))
        story = "? still to find: type its value and press enter (ctrl+r reveals it)"
        self.query_one(CellInfo).show(where, story + (f"\nhint: {clue}" if clue else ""), lit)
        return True

    def _answer_line(self, on: bool) -> None:
        line = self.query_one(AnswerLine)
        line.display = line.active = on
        line.clear()
        if on:
            line.focus()
        else:
            self.active_view().focus()

    # ------------------------------------------------------------ keys
    def action_quiz(self) -> None:
        if self.trace is None:
            return
        if self.quiz is not None:
            self.quiz, self._asked = None, None
            self._answer_line(False)
            self.query_one(StatusBar).say("quiz ended: every cell shown")
            self.show_step(self.step_id)
            return
        self._asked = []
        step_id, cell = self.quiz_loaded(None, self.step_id, self.cell)
        self.go(step_id, cell)

    def on_answer_line_submitted(self, message: AnswerLine.Submitted) -> None:
        if self.quiz is None or self.trace is None:
            return
        self.query_one(AnswerLine).clear()
        at = (self.step_id, *self.cell)
        outcome = self.quiz.answer(*at, message.text, self.fractions)
        self._keep(outcome, at, message.text)
        self._outcome(outcome, advance=True)

    def action_reveal(self) -> None:
        if self.quiz is not None and self.trace is not None:
            at = (self.step_id, *self.cell)
            outcome = self.quiz.reveal(*at, self.fractions)
            self._keep(outcome, at, None)
            self._outcome(outcome)

    def _keep(self, outcome, at: tuple, typed: str | None) -> None:
        """Writes a judged answer to the --save FILE (of this scenario only); a write that fails
        is said on the status line, and the quiz goes on."""
        if self._save is None or outcome.ok is None or not self._save.answers(self.trace.scenario):
            return
        try:
            self._save.record(self.quiz, *at, typed)
        except tracer.ScenarioError as err:
            self.notify(str(err), title="answers not saved", severity="error", timeout=10)

    def _outcome(self, outcome, advance: bool = False) -> None:
        """Says what an answer or a reveal did; after a right answer (`advance`) the cursor moves on
        to the step's next cell still to find (CONTRACT §12), after a wrong one it stays."""
        status = self.query_one(StatusBar)
        if outcome.ok is None:
            status.say(outcome.message, "warning")
            return
        if outcome.ok is False:
            self._hints[(self.step_id, *self.cell)] = outcome.hint
            status.say(outcome.message, "wrong")
            self.show_cell()
            return
        status.say(outcome.message, "right")
        if outcome.finished:
            self.notify(self.quiz.summary(), title="quiz complete", timeout=30)
        if outcome.opened and outcome.opened != self.step_id:
            self.go(outcome.opened, self.quiz.first_hidden_cell(outcome.opened))
            return
        following = self.quiz.next_hidden_cell(self.step_id, self.cell) if advance else None
        self.show_step(self.step_id, following or self.cell)

    def action_next_hidden(self) -> None:
        """Tab: the next cell still to find in this step (row by row), else the next open step; on
        the worksheet outside a quiz, the next matrix."""
        if self.quiz is None or not self.quiz.asks(self.step_id):
            if self.sheet:   # no cell to find here: tab goes to the sheet's next matrix
                self.focus_next(MatrixView)
            return
        following = self.quiz.next_hidden_cell(self.step_id, self.cell)
        if following:
            self.active_view().move_to(*following)
        elif self.quiz.first_open():
            self.go(self.quiz.first_open(), self.quiz.first_hidden_cell(self.quiz.first_open()))

    def on_answer_line_move(self, message: AnswerLine.Move) -> None:
        view = self.active_view()
        view.action_move(message.rows, message.cols)
        if tuple(view.cursor) != tuple(self.cell):  # now, not when CursorMoved arrives: an Enter typed
            self.cell = view.cursor                 # right after the arrow must check this cell
            self.show_cell()

    def on_answer_line_leave(self, message: AnswerLine.Leave) -> None:
        if self.answering():   # a number typed since the Esc claimed the line again
            return
        self.active_view().focus()
        self.query_one(StatusBar).say("browser keys (n, p, a, w, …); type a number or press enter to answer")

    def quiz_key(self, event) -> None:
        """Keys the answer line owns, wherever the focus is yet: the focus follows a claim late,
        and a burst (a paste, fast typing after Esc) must reach the line whole and in order."""
        if self.quiz is None:
            return
        line = self.query_one(AnswerLine)
        if not line.active:
            if not (event.key == "enter" or (event.character and event.character in ANSWER_START)):
                return   # a browser key
            line.active = True
            line.focus()
            if event.key == "enter":   # enter opens the line; the next one checks
                event.stop()
                return
        if line.take(event):
            event.stop()
            event.prevent_default()
