"""`attnsim class grade`: each student's filled answer sheet (CSV) or saved quiz, marked cell by
cell against the class's key.json as the quiz marks (tracer.answers); an empty cell is
unanswered, not wrong. Per student `K of N`, the wrong cells, and what the class got wrong most."""
from __future__ import annotations

import csv
import io
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from ..answers import NotAnAnswer, is_right, parse
from ..errors import ScenarioError, one_line
from ..writing import atomic_path
from . import folder as place
from . import saved as quiz

MAX_BYTES = 16 * 2**20
_STUDENT = re.compile(r"^(s\d+)(?![0-9])")
TOL = 1e-15   # the key's cells are exact; a typed fraction is compared with them as the quiz compares


@dataclass
class Wrong:
    step: str
    row: int
    col: int
    given: str
    expected: str


@dataclass
class Graded:
    """One student's marks."""
    student: str
    file: str
    total: int
    right: int = 0
    unanswered: int = 0
    revealed: int = 0
    wrong: list = field(default_factory=list)


def load_key(folder) -> dict:
    """The class's key.json, checked enough to mark with."""
    path = Path(folder) / place.KEY
    try:
        key = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ScenarioError("FOLDER", f"{folder} has no {place.KEY}; expected a class folder made by attnsim class "
                            "make") from None
    except (OSError, ValueError) as err:
        raise ScenarioError("file", f"cannot be read as a class's key ({one_line(str(err), 80)}); expected the "
                            f"{place.KEY} attnsim class make wrote", str(path)) from None
    if not isinstance(key, dict) or key.get("schema") != place.SCHEMA or not isinstance(key.get("students"), list):
        raise ScenarioError("schema", f"expected {place.SCHEMA!r}: the {place.KEY} attnsim class make wrote", str(path))
    for n, s in enumerate(key["students"]):
        if not (isinstance(s, dict) and all(isinstance(s.get(k), str) for k in ("id", "name", "fingerprint"))
                and isinstance(s.get("cells"), dict) and all(_grid(g) for g in s["cells"].values())):
            raise ScenarioError(f"students[{n}]", "expected id, name, fingerprint and cells (rows of exact values) "
                                f"as attnsim class make wrote them", str(path))
    return key


def _grid(grid) -> bool:
    """Rows of equal length of exact values (`27/46`, `3`, `-inf`)."""
    if not (isinstance(grid, list) and grid and all(isinstance(r, list) and len(r) == len(grid[0]) for r in grid)):
        return False
    try:
        return all(v == "-inf" or Fraction(v) is not None for r in grid for v in r)
    except (TypeError, ValueError, ZeroDivisionError):
        return False


def student_of(path: Path, ids: list[str]) -> str:
    """The student a file belongs to, from its name (s07.csv, s07-ana.csv)."""
    match = _STUDENT.match(path.name)
    if not match:
        raise ScenarioError("ANSWERS", f"{path.name} names no student; expected a file name that starts with the "
                            f"student's id ({ids[0]}.csv, {ids[0]}-ana.csv)", str(path))
    if match.group(1) not in ids:
        raise ScenarioError("ANSWERS", f"{match.group(1)} is not a student of this class; expected one of "
                            f"{ids[0]} … {ids[-1]}", str(path))
    return match.group(1)


def read_answers(path: Path, expected: dict) -> tuple[dict, int]:
    """(step, row, col) → the text given, and how many cells were revealed (a quiz's); from a
    CSV sheet, a quiz's saved answers or an npz of arrays, of this student's sheet (`expected`:
    the key entry)."""
    where = str(path)
    if path.suffix.lower() == ".npz":   # an array per step, as attnsim check reads it
        from .npz_sheet import read
        return read(path, expected), 0
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as err:
        raise ScenarioError("file", f"cannot be read ({err.strerror or err}); expected an answer sheet", where) from None
    if len(raw) > MAX_BYTES or b"\x00" in raw:
        raise ScenarioError("file", "is not CSV (binary or larger than 16 MiB); expected the student's filled "
                            "answer sheet (step,row,col,value) or saved quiz", where)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ScenarioError("file", "is not CSV (not UTF-8 text); expected the student's filled answer sheet "
                            "(step,row,col,value) or saved quiz", where) from None
    if quiz.looks_saved(text):
        saved = quiz.parse(text, where)
        if saved.fingerprint != expected["fingerprint"]:
            raise ScenarioError("fingerprint", f"the quiz answered {saved.scenario!r}, not {expected['name']!r} "
                                f"(another sheet's numbers); expected the quiz of {expected['name']}.toml", where)
        given = saved.answers()
        for n, at in enumerate(given):
            _check_cell(at, expected, where, f"cells[{n}]")
        return given, saved.revealed()
    return _read_csv(text, expected, where), 0


def _read_csv(text: str, expected: dict, where: str) -> dict:
    rows = csv.reader(io.StringIO(text))
    header = [h.strip().lower() for h in next(rows, [])]
    if not {"step", "row", "col", "value"} <= set(header):
        raise ScenarioError("file", "is not CSV with the header step,row,col,value; expected the student's "
                            "filled answer sheet (the class's sNN.csv) or saved quiz", where)
    at = {name: header.index(name) for name in ("step", "row", "col", "value")}
    given = {}
    for line, row in enumerate(rows, start=2):
        if not any(cell.strip() for cell in row):
            continue
        try:
            cell = (row[at["step"]].strip(), int(row[at["row"]]), int(row[at["col"]]))
            value = row[at["value"]] if len(row) > at["value"] else ""
        except (IndexError, ValueError):
            raise ScenarioError(f"line {line}", "expected a step id, a row and a column (whole numbers) and a value",
                                where) from None
        _check_cell(cell, expected, where, f"line {line}")
        if cell in given:
            raise ScenarioError(f"line {line}", f"{cell[0]} row {cell[1]} col {cell[2]} is given twice; expected "
                                "each cell once", where)
        given[cell] = value
    return given


def _check_cell(cell, expected: dict, where: str, name: str) -> None:
    step, row, col = cell
    grid = expected["cells"].get(step)
    if grid is None or not (0 <= row < len(grid) and 0 <= col < len(grid[0])):
        raise ScenarioError(name, f"{one_line(str(step), 40)} row {row} col {col} is not a cell of "
                            f"{expected['id']}'s sheet; expected the rows of its answer sheet", where)


def mark(expected: dict, given: dict, file: str, revealed: int = 0) -> Graded:
    """Each expected cell judged: empty is unanswered; right as the quiz judges; anything else
    (a wrong number, a word) wrong, with what was given."""
    cells = [(step, r, c, want) for step, grid in expected["cells"].items()
             for r, line in enumerate(grid) for c, want in enumerate(line)]
    out = Graded(expected["id"], file, len(cells), revealed=revealed)
    for step, r, c, want in cells:
        text = given.get((step, r, c), "").strip()
        if not text:
            out.unanswered += 1
            continue
        value = -math.inf if want == "-inf" else float(Fraction(want))
        try:
            ok = is_right(parse(text), value, TOL)
        except NotAnAnswer:
            ok = False
        if ok:
            out.right += 1
        else:
            out.wrong.append(Wrong(step, r, c, one_line(text, 40), want))
    return out


def grade(folder, files) -> tuple[dict, list[Graded]]:
    """Marks every answers file against the class in `folder` (all files checked before any mark)."""
    key = load_key(folder)
    students = {s["id"]: s for s in key["students"]}
    ids = list(students)
    owners: dict[str, Path] = {}
    for name in files:
        path = Path(name)
        sid = student_of(path, ids)
        if sid in owners:
            raise ScenarioError("ANSWERS", f"two files for {sid} ({owners[sid].name} and {path.name}); expected one "
                                "per student", str(path))
        owners[sid] = path
    read = {sid: read_answers(path, students[sid]) for sid, path in owners.items()}
    marks = []
    for sid in ids:   # in the class's order
        if sid in read:
            given, revealed = read[sid]
            marks.append(mark(students[sid], given, str(owners[sid]), revealed))
    return key, marks


def write_grades(folder, key: dict, results: list[Graded]) -> Path:
    """grades.csv in the class folder: one row per student (no file: no marks), written atomically."""
    by_id = {g.student: g for g in results}
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(("student", "file", "right", "wrong", "unanswered", "cells"))
    for s in key["students"]:
        g = by_id.get(s["id"])
        out.writerow((s["id"], "", "", "", "", "") if g is None else
                     (g.student, Path(g.file).name, g.right, len(g.wrong), g.unanswered, g.total))
    path = Path(folder) / "grades.csv"
    with atomic_path(path) as tmp:
        tmp.write_text(buf.getvalue(), encoding="utf-8")
    return path


def report(key: dict, results: list[Graded], most: int = 5) -> list[str]:
    """The lines `class grade` prints: each student's marks and wrong cells, then the class's."""
    labels = key.get("labels", {})
    lines = []
    for g in results:
        extra = [f"{len(g.wrong)} wrong", f"{g.unanswered} unanswered"]
        extra += [f"{g.revealed} revealed"] if g.revealed else []
        lines.append(f"{g.student} ({Path(g.file).name}): {g.right} of {g.total} right, {', '.join(extra)}")
        lines += [f"  {_cell(w.step, w.row, w.col, labels)}: given {w.given}, expected {w.expected}" for w in g.wrong]
    missing = [s["id"] for s in key["students"] if s["id"] not in {g.student for g in results}]
    right, total = sum(g.right for g in results), sum(g.total for g in results)
    late = f"; nothing from {', '.join(missing[:12])}{' …' if len(missing) > 12 else ''}" if missing else ""
    lines.append(f"class: {len(results)} sheet{'s' * (len(results) != 1)} marked, {right} of {total} cells right{late}")
    cells = Counter((w.step, w.row, w.col) for g in results for w in g.wrong)
    if cells:
        lines.append("most often wrong (to explain again): " + ", ".join(
            f"{_cell(*at, labels)} ({k} student{'s' * (k != 1)})" for at, k in cells.most_common(most)))
        steps = Counter(w.step for g in results for w in g.wrong)
        lines.append("steps most often wrong: " + ", ".join(f"{sid} ({k} cell{'s' * (k != 1)})"
                                                             for sid, k in steps.most_common(most)))
    else:
        lines.append("no cell wrong")
    return lines


def _cell(step: str, row: int, col: int, labels: dict) -> str:
    """`h0.weights row 1 col 2 (x2, x3)`: the indices of the sheet, and the names on its margins."""
    names = labels.get(step)
    where = f" ({names[0][row]}, {names[1][col]})" if names else ""
    return f"{step} row {row} col {col}{where}"
