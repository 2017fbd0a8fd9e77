"""`attnsim class grade`: each student's filled answer sheet (CSV) or saved quiz, marked cell by
cell against the class's key.json as the quiz marks (tracer.answers); an empty cell is
unanswered, not wrong. Per student `K of N`, the wrong cells, and what the class got wrong most."""
from __future__ import annotations

import csv
import io
import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from ..answers import NotAnAnswer, is_right, parse
from ..errors import ScenarioError, one_line
from ..readfile import read_bounded, read_json
from ..writing import atomic_path, spreadsheet_text
from . import folder as place
from . import saved as quiz

MAX_BYTES = 16 * 2**20
_STUDENT = re.compile(r"^(s\d+)(?![0-9])")
TOL = 1e-15   # the key's cells are exact; a typed fraction is compared with them as the quiz compares
GRADES = "grades.csv"
COLUMNS = ("student", "file", "right", "wrong", "unanswered", "cells", "percentage", "hinted")
SHEET = "the student's filled answer sheet (step,row,col,value) or saved quiz"


@dataclass
class Wrong:
    step: str
    row: int
    col: int
    given: str
    expected: str


@dataclass
class Graded:
    """One student's marks; `right` counts the cells right after a hint too, `hinted` those alone."""
    student: str
    file: str
    total: int
    right: int = 0
    unanswered: int = 0
    revealed: int = 0
    hinted: int = 0
    wrong: list = field(default_factory=list)

    def row(self) -> tuple:
        """The student's row of grades.csv (COLUMNS)."""
        return (self.student, Path(self.file).name, self.right, len(self.wrong), self.unanswered, self.total,
                f"{100 * self.right / self.total:.1f}" if self.total else "", self.hinted)


def load_key(folder) -> dict:
    """The class's key.json (a regular file, bounded), checked enough to mark with: ids as class
    make gives them, every cell an exact value (written back in its plain form, 27/46)."""
    path = Path(folder) / place.KEY
    if not os.path.lexists(path):
        raise ScenarioError("FOLDER", f"{folder} has no {place.KEY}; expected a class folder made by attnsim class "
                            "make")
    made = f"the {place.KEY} attnsim class make wrote"
    key = read_json(path, MAX_BYTES, "file", f"a class's key ({made})", str(path))
    if not isinstance(key, dict) or key.get("schema") != place.SCHEMA or not isinstance(key.get("students"), list):
        raise ScenarioError("schema", f"expected {place.SCHEMA!r}: {made}", str(path))
    seen = set()
    for n, s in enumerate(key["students"]):
        if not (isinstance(s, dict) and all(isinstance(s.get(k), str) for k in ("id", "name", "fingerprint"))
                and isinstance(s.get("cells"), dict) and s["cells"]):
            raise ScenarioError(f"students[{n}]", "expected id, name, fingerprint and cells (rows of exact values) "
                                f"as attnsim class make wrote them", str(path))
        if not place.ID.fullmatch(s["id"]) or s["id"] in seen:
            raise ScenarioError(f"students[{n}].id", f"expected a student's id as class make gives them, s01, s02, "
                                f"… (each once), got {s['id']!r}", str(path))
        seen.add(s["id"])
        for step, grid in s["cells"].items():
            s["cells"][step] = _grid(grid, f"students[{n}].cells.{step}", str(path))
    if not isinstance(key.get("labels", {}), dict):
        raise ScenarioError("labels", "expected each step's row and column labels", str(path))
    return key


def _grid(grid, name: str, where: str) -> list:
    """Rows of equal length of exact values (`27/46`, `3`, `-inf`), read by the quiz's own parser
    (bounded: `1e50000000` is refused at once, not computed), in their plain form."""
    if not (isinstance(grid, list) and grid and all(isinstance(r, list) and r and len(r) == len(grid[0])
                                                    for r in grid)):
        raise ScenarioError(name, "expected rows of equal length of exact values (27/46, 3, -inf)", where)
    return [[_exact(v, f"{name}[{r}][{c}]", where) for c, v in enumerate(row)] for r, row in enumerate(grid)]


def _exact(v, name: str, where: str) -> str:
    try:
        answer = parse(v) if isinstance(v, str) else None
    except NotAnAnswer:
        answer = None
    if answer is not None and answer.value == -math.inf:
        return "-inf"
    if answer is None or not (answer.exact and isinstance(answer.value, Fraction)):
        raise ScenarioError(name, f"expected an exact value within float64's range (27/46, 3, -inf), got "
                            f"{one_line(repr(v), 60)}", where)
    return str(answer.value)


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


def read_answers(path: Path, expected: dict) -> tuple[dict, int, set]:
    """(step, row, col) → the text given, how many cells were revealed and which were found only
    after a hint (a quiz's); from a CSV sheet, a quiz's saved answers or an npz of arrays, of this student's sheet
    (`expected`: the key entry). A regular file only: a FIFO would hang, /dev/zero never end."""
    where = str(path)
    if path.suffix.lower() == ".npz":   # an array per step, as attnsim check reads it
        from .npz_sheet import read
        return read(path, expected), 0, set()
    raw = read_bounded(path, MAX_BYTES, "file", SHEET, where)
    if b"\x00" in raw:
        raise ScenarioError("file", f"is not CSV (binary or larger than 16 MiB); expected {SHEET}", where)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ScenarioError("file", f"is not CSV (not UTF-8 text); expected {SHEET}", where) from None
    if quiz.looks_saved(text):
        saved = quiz.parse(text, where)
        if saved.fingerprint != expected["fingerprint"]:
            raise ScenarioError("fingerprint", f"the quiz answered {saved.scenario!r}, not {expected['name']!r} "
                                f"(another sheet's numbers); expected the quiz of {expected['name']}.toml", where)
        given = saved.answers()
        for n, at in enumerate(given):
            _check_cell(at, expected, where, f"cells[{n}]")
        return given, saved.revealed(), saved.hinted()
    return _read_csv(text, expected, where), 0, set()


def _read_csv(text: str, expected: dict, where: str) -> dict:
    """The sheet's values by cell; line ends \\n, \\r\\n or \\r alone (an old spreadsheet's). A value a
    spreadsheet was told to keep as text (`'-1/3`) is read without its quote."""
    rows = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip().lower() for h in next(rows, [])]
        if not {"step", "row", "col", "value"} <= set(header):
            raise ScenarioError("file", "is not CSV with the header step,row,col,value; expected the student's "
                                "filled answer sheet (the class's sNN.csv) or saved quiz", where)
        at = {name: header.index(name) for name in ("step", "row", "col", "value")}
        given = {}
        for row in rows:
            if any(cell.strip() for cell in row):
                cell, value = _cell_of(row, at, where, f"line {rows.line_num}")
                _check_cell(cell, expected, where, f"line {rows.line_num}")
                if cell in given:
                    raise ScenarioError(f"line {rows.line_num}", f"{cell[0]} row {cell[1]} col {cell[2]} is given "
                                        "twice; expected each cell once", where)
                given[cell] = value.strip().removeprefix("'")
    except csv.Error as err:   # a field over csv's limit (131 072 characters), a stray quote, …
        raise ScenarioError(f"line {rows.line_num}", f"cannot be read as CSV ({one_line(str(err), 80)}); expected "
                            f"{SHEET}", where) from None
    return given


def _cell_of(row: list, at: dict, where: str, name: str) -> tuple[tuple, str]:
    try:
        return (row[at["step"]].strip(), int(row[at["row"]]), int(row[at["col"]])), \
            (row[at["value"]] if len(row) > at["value"] else "")
    except (IndexError, ValueError):
        raise ScenarioError(name, "expected a step id, a row and a column (whole numbers) and a value", where) from None


def _check_cell(cell, expected: dict, where: str, name: str) -> None:
    step, row, col = cell
    grid = expected["cells"].get(step)
    if grid is None or not (0 <= row < len(grid) and 0 <= col < len(grid[0])):
        raise ScenarioError(name, f"{one_line(str(step), 40)} row {row} col {col} is not a cell of "
                            f"{expected['id']}'s sheet; expected the rows of its answer sheet", where)


def mark(expected: dict, given: dict, file: str, revealed: int = 0, hinted: frozenset = frozenset()) -> Graded:
    """Each expected cell judged: empty is unanswered; right as the quiz judges; anything else
    (a wrong number, a word) wrong, with what was given. A right cell in `hinted` was found only
    after a hint."""
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
            out.hinted += (step, r, c) in hinted
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
            given, revealed, hinted = read[sid]
            marks.append(mark(students[sid], given, str(owners[sid]), revealed, hinted))
    return key, marks


def write_grades(folder, key: dict, results: list[Graded]) -> Path:
    """grades.csv in the class folder, one row per student, merged with the marks already there: a
    student graded now is updated, the others keep theirs (no file ever: an empty row). Written
    atomically; every text cell disarmed for a spreadsheet."""
    path = Path(folder) / GRADES
    rows = {**earlier_grades(path, key), **{g.student: g.row() for g in results}}
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(COLUMNS)
    for s in key["students"]:
        row = rows.get(s["id"], (s["id"],) + ("",) * (len(COLUMNS) - 1))
        out.writerow([spreadsheet_text(str(v)) for v in row])
    with atomic_path(path) as tmp:
        tmp.write_text(buf.getvalue(), encoding="utf-8")
    return path


def earlier_grades(path: Path, key: dict) -> dict[str, tuple]:
    """The rows of an earlier grades.csv with marks, by student of this class (an older file's
    missing columns empty); none when there is no file. One that is not such a file is refused,
    so that no mark is lost by rewriting it."""
    if not os.path.lexists(path):
        return {}
    expected = f"the {GRADES} attnsim class grade wrote (move it away to start anew)"
    try:
        table = list(csv.DictReader(io.StringIO(read_bounded(path, MAX_BYTES, GRADES, expected, str(path))
                                                .decode("utf-8-sig"), newline="")))
    except (UnicodeDecodeError, csv.Error):
        table = None
    if table is None or (table and "student" not in table[0]):
        raise ScenarioError(GRADES, f"cannot be read as CSV with a student column; expected {expected}", str(path))
    ids = {s["id"] for s in key["students"]}
    return {r["student"]: tuple(r.get(c) or "" for c in COLUMNS) for r in table
            if r.get("student") in ids and any(r.get(c) for c in COLUMNS[1:])}


def report(key: dict, results: list[Graded], most: int = 5) -> list[str]:
    """The lines `class grade` prints: each student's marks and wrong cells, then the class's.
    Every name in them escaped as the error messages are (a file name could hold escapes)."""
    labels = key.get("labels", {})
    lines = []
    for g in results:
        extra = [f"{len(g.wrong)} wrong", f"{g.unanswered} unanswered"]
        extra += [f"{g.revealed} revealed"] if g.revealed else []
        after = f" ({g.hinted} after a hint)" if g.hinted else ""
        lines.append(f"{g.student} ({one_line(Path(g.file).name, 80)}): {g.right} of {g.total} right{after}, "
                     f"{', '.join(extra)}")
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
        lines.append("steps most often wrong: " + ", ".join(f"{one_line(sid, 40)} ({k} cell{'s' * (k != 1)})"
                                                             for sid, k in steps.most_common(most)))
    else:
        lines.append("no cell wrong")
    return lines


def _cell(step: str, row: int, col: int, labels: dict) -> str:
    """`h0.weights row 1 col 2 (x2, x3)`: the indices of the sheet, and the names on its margins
    (when the key has them for that cell)."""
    names = labels.get(step)
    try:
        where = f" ({one_line(names[0][row], 40)}, {one_line(names[1][col], 40)})"
    except (TypeError, IndexError, KeyError):
        where = ""
    return f"{one_line(step, 40)} row {row} col {col}{where}"
