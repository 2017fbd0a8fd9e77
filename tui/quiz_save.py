"""`attnsim quiz SCENARIO --save FILE`: every answer written to FILE as it is judged (atomically,
in tracer.classroom.saved's format), and a quiz reopened with the same FILE resumed where it
stopped. A FILE of another scenario is refused before the TUI opens. No Textual here."""
from __future__ import annotations

import os

from tracer.classroom.identity import fingerprint
from tracer.classroom.saved import Saved, read
from tracer.errors import ScenarioError

from .quiz import AFTER_HINT, FIRST, HIDDEN, REVEALED, Quiz

STATE_OF = {FIRST: "right", AFTER_HINT: "right after a hint", REVEALED: "revealed"}
MARK_OF = {state: mark for mark, state in STATE_OF.items()}


class QuizSave:
    """The quiz's answers, kept in a file."""

    def __init__(self, path, saved: Saved) -> None:
        self.path, self.saved = path, saved
        self._checked: tuple = (None, False)   # (scenario, whether it is the saved one)

    def answers(self, scenario) -> bool:
        """Whether this scenario is the one the file answers (the same numbers)."""
        if self._checked[0] is not scenario:
            self._checked = (scenario, fingerprint(scenario) == self.saved.fingerprint)
        return self._checked[1]

    def restore(self, quiz: Quiz) -> int:
        """Puts the saved answers back into a new quiz of the same scenario; how many cells."""
        restored = 0
        for (sid, r, c), entry in self.saved.cells.items():
            marks = quiz.marks.get(sid)
            if marks is None or not (r < marks.shape[0] and c < marks.shape[1]):
                continue   # a step this quiz does not ask (another --step): kept in the file all the same
            marks[r, c] = MARK_OF.get(entry["state"], HIDDEN)
            quiz.tries[(sid, r, c)] = entry["tries"]
            quiz.mistakes[sid] += entry["tries"]
            restored += 1
        return restored

    def record(self, quiz: Quiz, sid: str, row: int, col: int, typed: str | None) -> None:
        """Writes what became of one cell (typed None: revealed, the last text kept)."""
        mark = int(quiz.marks[sid][row, col])
        old = self.saved.cells.get((sid, row, col), {}).get("typed", "")
        self.saved.cells[(sid, row, col)] = {
            "typed": old if typed is None else typed.strip(),
            "state": STATE_OF.get(mark, "wrong"), "tries": int(quiz.tries[(sid, row, col)])}
        self.saved.arithmetic = quiz.trace.arithmetic.preset
        self.saved.steps = sorted(set(self.saved.steps) | set(quiz.steps), key=_order(quiz))
        self.write()

    def write(self) -> None:
        try:
            self.saved.write(self.path)
        except ScenarioError as err:   # the file is named by --save, not -o
            raise ScenarioError("--save", err.expected) from None


def _order(quiz: Quiz):
    steps = [s.id for s in quiz.trace.steps]
    return lambda sid: steps.index(sid) if sid in steps else len(steps)


def open_saved(path, scenario) -> QuizSave:
    """The answers saved in FILE for this scenario (to resume), or a new FILE written now (so that
    a path that cannot be written is said at once); a FILE of another scenario is refused."""
    if not str(path).strip():
        raise ScenarioError("--save", f"expected a file name for the answers (such as s01-quiz.json), got {path!r}")
    mine = fingerprint(scenario)
    if os.path.exists(path):
        saved = read(path)
        if saved.fingerprint != mine:
            raise ScenarioError("--save", f"{path} holds the answers of {saved.scenario!r}, another scenario (other "
                                f"numbers); expected the saved quiz of {scenario.name!r}, or a new FILE")
        return QuizSave(path, saved)
    save = QuizSave(path, Saved(scenario.name, mine, scenario.preset))
    save.write()
    return save
