"""A quiz over a trace: which cells are still hidden, what a typed answer earns (✓, ✗ with a
hint, revealed), `K of N` per step, the next step to open, and the closing summary. No Textual."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

import tracer
from tracer.answers import NotAnAnswer, is_right, parse
from tracer.printing import fmt_approx, fractions_for, tolerance

from .hints import hint

HIDDEN, FIRST, AFTER_HINT, REVEALED = 0, 1, 2, 3   # what each cell of a quizzed step holds


def quiz_steps(trace: tracer.Trace, chosen: list[str] | None = None) -> list[str]:
    """The steps to ask, in pipeline order: the chosen ones, or every computed step (not the input
    x: inputs and weights stay shown). A step the trace lacks is a ScenarioError naming it."""
    computed = [s.id for s in trace.steps if s.inputs]
    if not chosen:
        return computed
    for sid in chosen:
        if sid not in computed:
            what = "an input, always shown" if sid in trace else "not a step of this trace"
            raise tracer.ScenarioError("--step", f"expected a computed step ({', '.join(computed[:4])}, …), "
                                       f"got {sid!r}: {what}")
    return [sid for sid in computed if sid in chosen]


@dataclass
class Outcome:
    """What Enter (or reveal) did: `ok` True (right), False (wrong), None (nothing checked)."""
    ok: bool | None
    message: str
    hint: str = ""
    opened: str | None = None    # the next step to show, when this one is complete
    finished: bool = False


class Quiz:
    def __init__(self, trace: tracer.Trace, steps: list[str]) -> None:
        self.steps = list(steps)
        self.marks = {sid: np.full(trace.step(sid).shape, HIDDEN, np.int8) for sid in self.steps}
        self.tries: Counter = Counter()      # (step, row, col) → wrong answers so far
        self.mistakes: Counter = Counter()   # step → wrong answers
        self.trace = trace

    # ------------------------------------------------------------ what is hidden
    def asks(self, step_id: str) -> bool:
        return step_id in self.marks

    def hidden(self, step_id: str) -> np.ndarray | None:
        """True where the cell is still to find (None: the step is not asked)."""
        marks = self.marks.get(step_id)
        return None if marks is None else marks == HIDDEN

    def is_hidden(self, step_id: str, row: int, col: int) -> bool:
        marks = self.marks.get(step_id)
        return marks is not None and marks[row, col] == HIDDEN

    def progress(self, step_id: str) -> tuple[int, int]:
        """(cells found, cells asked): a revealed cell is not found (see `revealed`)."""
        marks = self.marks[step_id]
        return int(np.count_nonzero((marks == FIRST) | (marks == AFTER_HINT))), marks.size

    def revealed(self, step_id: str) -> int:
        return int(np.count_nonzero(self.marks[step_id] == REVEALED))

    def first_open(self) -> str | None:
        return next((sid for sid in self.steps if (self.marks[sid] == HIDDEN).any()), None)

    def first_hidden_cell(self, step_id: str) -> tuple[int, int]:
        """The first cell still to find (row by row), or (0, 0)."""
        left = np.argwhere(self.marks[step_id] == HIDDEN)
        return tuple(int(i) for i in left[0]) if len(left) else (0, 0)

    def next_hidden_cell(self, step_id: str, cell: tuple[int, int]) -> tuple[int, int] | None:
        """The next cell still to find after `cell` (row by row, from the top again after the last),
        or None when none is left in the step."""
        left = [tuple(int(i) for i in rc) for rc in np.argwhere(self.marks[step_id] == HIDDEN)]
        return next((rc for rc in left if rc > tuple(cell)), left[0] if left else None)

    def rerun(self, trace: tracer.Trace) -> None:
        """Keeps the progress on a re-run (another arithmetic or layout): a flipped layout
        transposes the marks, a step that is gone (relu has no powers) leaves the quiz."""
        for sid in list(self.steps):
            shape = trace.step(sid).shape if sid in trace else None
            marks = self.marks[sid]
            if shape is None:
                self.steps.remove(sid)
                del self.marks[sid]
            elif marks.shape != shape:
                self.marks[sid] = marks.T.copy() if marks.T.shape == shape else np.full(shape, HIDDEN, np.int8)
        self.trace = trace

    # ------------------------------------------------------------ answering
    def _where(self, step_id: str) -> str:
        done, total = self.progress(step_id)
        shown = self.revealed(step_id)
        return f"{step_id}: {done} of {total} cells right" + (f", {shown} revealed" if shown else "")

    def answer(self, step_id: str, row: int, col: int, typed: str, fractions: bool = True) -> Outcome:
        """Checks what was typed into one cell."""
        if not self.is_hidden(step_id, row, col):
            return Outcome(None, "this cell is shown already: move to a cell marked ?" if self.asks(step_id)
                           else f"{step_id} is not asked in this quiz")
        try:
            given = parse(typed)
        except NotAnAnswer as err:
            return Outcome(None, str(err))
        value = float(self.trace[step_id][row, col])
        if is_right(given, value, tolerance(self.trace.dtype)):
            key = (step_id, row, col)
            self.marks[step_id][row, col] = FIRST if self.tries[key] == 0 else AFTER_HINT
            return self._filled(step_id, f"✓ {given.text} is right │ {self._where(step_id)}", fractions)
        self.tries[(step_id, row, col)] += 1
        self.mistakes[step_id] += 1
        level = min(self.tries[(step_id, row, col)], 2)
        clue = hint(self.trace, step_id, row, col, level, fractions, typed=given)
        return Outcome(False, f"✗ {given.text} is not it │ {self._where(step_id)} │ hint: {clue}", clue)

    def reveal(self, step_id: str, row: int, col: int, fractions: bool = True) -> Outcome:
        if not self.is_hidden(step_id, row, col):
            return Outcome(None, "nothing to reveal here: this cell is shown")
        self.marks[step_id][row, col] = REVEALED
        value = fmt_approx(self.trace[step_id][row, col], fractions and fractions_for(self.trace),
                           tol=tolerance(self.trace.dtype))
        return self._filled(step_id, f"revealed: {value} │ {self._where(step_id)}", fractions)

    def _filled(self, step_id: str, message: str, fractions: bool) -> Outcome:
        outcome = Outcome(True, message)
        if (self.marks[step_id] == HIDDEN).any():
            return outcome
        outcome.opened = self.first_open()
        if outcome.opened is None:
            outcome.finished = True
            outcome.message += " │ quiz complete: " + self.summary()
        else:
            outcome.message += f" │ {step_id} complete, on to {outcome.opened}"
        return outcome

    # ------------------------------------------------------------ scoring
    def counts(self) -> dict[str, int]:
        marks = np.concatenate([m.ravel() for m in self.marks.values()]) if self.marks else np.zeros(0)
        return {"right first time": int((marks == FIRST).sum()), "right after a hint": int((marks == AFTER_HINT).sum()),
                "revealed": int((marks == REVEALED).sum()), "still hidden": int((marks == HIDDEN).sum())}

    def hardest(self, n: int = 3) -> list[tuple[str, int]]:
        """The steps with the most wrong answers, most first."""
        return [(sid, k) for sid, k in self.mistakes.most_common(n) if k > 0]

    def summary(self) -> str:
        counts = self.counts()
        parts = [f"{k} {name}" for name, k in counts.items() if k or name != "still hidden"]
        hard = self.hardest()
        tail = ("most mistakes in " + ", ".join(f"{sid} ({k})" for sid, k in hard)) if hard else "no mistakes"
        return ", ".join(parts) + "; " + tail
