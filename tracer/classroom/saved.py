"""A quiz's saved answers (`attnsim quiz SCENARIO --save FILE`): which scenario they answer (its
fingerprint), and per cell what was typed and what became of it. The quiz writes and resumes
it; `attnsim class grade` marks it like a filled answer sheet."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ScenarioError
from ..readfile import parse_json, read_json
from ..writing import atomic_path

SCHEMA = "attnsim.quiz/1"
STATES = ("right", "right after a hint", "revealed", "wrong")   # "wrong": still to find, tried
MAX_BYTES = 16 * 2**20
EXPECTED = "the file attnsim quiz --save wrote"
WHAT = "a quiz's saved answers"


@dataclass
class Saved:
    """The answers of one quiz; `cells` maps (step, row, col) to {"typed", "state", "tries"}."""
    scenario: str
    fingerprint: str
    arithmetic: str = ""
    steps: list = field(default_factory=list)
    cells: dict = field(default_factory=dict)

    def document(self) -> dict:
        cells = [{"step": s, "row": r, "col": c, **entry} for (s, r, c), entry in self.cells.items()]
        return {"schema": SCHEMA, "scenario": self.scenario, "fingerprint": self.fingerprint,
                "arithmetic": self.arithmetic, "steps": list(self.steps), "cells": cells}

    def write(self, path) -> None:
        """Atomically: a quiz killed mid-write leaves the previous answers whole."""
        with atomic_path(path) as tmp:
            tmp.write_text(json.dumps(self.document(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")

    def answers(self) -> dict:
        """(step, row, col) → the text to mark; a revealed cell was not answered (empty)."""
        return {at: "" if e["state"] == "revealed" else e["typed"] for at, e in self.cells.items()}

    def revealed(self) -> int:
        return sum(e["state"] == "revealed" for e in self.cells.values())

    def hinted(self) -> set:
        """The cells found only after a hint (a wrong answer first)."""
        return {at for at, e in self.cells.items() if e["state"] == "right after a hint"}


def looks_saved(text: str) -> bool:
    """Whether a file's text is a quiz's saved answers rather than a CSV sheet."""
    return text.lstrip().startswith("{") and SCHEMA in text[:400]


def parse(text: str, where: str) -> Saved:
    """The saved answers in `text`, or a ScenarioError naming the file and the field."""
    return _saved(parse_json(text, "file", EXPECTED, where, WHAT), where)


def _saved(doc, where: str) -> Saved:
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ScenarioError("schema", f"expected {SCHEMA!r}: {EXPECTED}", where)
    for key in ("scenario", "fingerprint", "arithmetic"):
        if not isinstance(doc.get(key), str):
            raise ScenarioError(key, "expected a string", where)
    steps = doc.get("steps")
    if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
        raise ScenarioError("steps", "expected a list of step ids", where)
    saved = Saved(doc["scenario"], doc["fingerprint"], doc["arithmetic"], steps)
    cells = doc.get("cells")
    if not isinstance(cells, list):
        raise ScenarioError("cells", "expected a list of answered cells", where)
    for n, cell in enumerate(cells):
        saved.cells[_place(cell, f"cells[{n}]", where)] = _entry(cell, f"cells[{n}]", where)
    return saved


def _place(cell, name: str, where: str) -> tuple[str, int, int]:
    ok = (isinstance(cell, dict) and isinstance(cell.get("step"), str)
          and all(isinstance(cell.get(k), int) and not isinstance(cell.get(k), bool) and cell[k] >= 0
                  for k in ("row", "col")))
    if not ok:
        raise ScenarioError(name, "expected a step id and a row and column (whole numbers ≥ 0)", where)
    return cell["step"], cell["row"], cell["col"]


def _entry(cell: dict, name: str, where: str) -> dict:
    typed, state, tries = cell.get("typed"), cell.get("state"), cell.get("tries", 0)
    if not isinstance(typed, str) or state not in STATES or not isinstance(tries, int) or tries < 0:
        raise ScenarioError(name, f"expected typed (text), state ({', '.join(STATES)}) and tries (a whole "
                            "number ≥ 0)", where)
    return {"typed": typed, "state": state, "tries": tries}


def read(path) -> Saved:
    """The saved answers in the file at `path` (a regular file, bounded, UTF-8), errors naming it."""
    where = str(path)
    return _saved(read_json(Path(path), MAX_BYTES, "file", EXPECTED, where, WHAT), where)
