"""`attnsim class grade` on a simulated class: sheets all right, some wrong, in decimals, with blanks
and junk, a saved quiz; per student `K of N` and the wrong cells, the class's most-missed cells,
grades.csv; and every answers file it must refuse (one line, exit 2, grades.csv untouched).
The key's own numbers are checked against Fractions in test_classroom.py."""
from __future__ import annotations

import csv
import json
import math
from fractions import Fraction
from pathlib import Path

import pytest

from test_cli_errors import cli, one_error_line
from tracer.classroom import printing
from tracer.classroom.make import make_class
from tracer.classroom.saved import Saved


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    """by_hand for four students and gpt_causal (a mask: −∞ to type) for two; no PDFs (not marked)."""
    root = tmp_path_factory.mktemp("grade")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(printing, "write_pdf", lambda path, pages: Path(path).write_bytes(b"%PDF-"))
        return {name: make_class(name, n, root / name, seed=21).folder for name, n in (("by_hand", 4), ("gpt_causal", 2))}


def key_of(folder: Path) -> dict:
    return json.loads((folder / "key.json").read_text(encoding="utf-8"))


def cells_of(folder: Path, sid: str) -> dict:
    return next(s for s in key_of(folder)["students"] if s["id"] == sid)["cells"]


def fill(folder: Path, sid: str, out: Path, value=lambda step, r, c, want: want) -> Path:
    """The student's blank sheet with each value written by `value` (default: the key's)."""
    cells = cells_of(folder, sid)
    rows = list(csv.reader((folder / f"{sid}.csv").open(encoding="utf-8")))
    for row in rows[1:]:
        row[3] = value(row[0], int(row[1]), int(row[2]), cells[row[0]][int(row[1])][int(row[2])])
    with out.open("w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(rows)
    return out


def total(folder: Path, sid: str) -> int:
    return sum(len(m) * len(m[0]) for m in cells_of(folder, sid).values())


def grades(folder: Path) -> list[dict]:
    return list(csv.DictReader((folder / "grades.csv").open(encoding="utf-8")))


def decimal(want: str, places: int = 3) -> str:
    return want if want == "-inf" or Fraction(want).denominator == 1 else f"{float(Fraction(want)):.{places}f}"


def test_a_class_all_right_some_wrong_in_decimals_with_blanks_and_junk(klass, tmp_path, capsys):
    folder = klass["by_hand"]
    n = total(folder, "s01")
    wrong = {("h0.weights", 0, 0), ("h0.sums", 0, 1)}
    bumped = lambda step, r, c, want: str(Fraction(want) + 1) if (step, r, c) in wrong else want   # noqa: E731
    junk = {("h0.z", 1, 1): "banana", ("h0.z", 2, 2): "1/0", ("h0.exp", 0, 0): "3^2"}
    files = [fill(folder, "s01", tmp_path / "s01.csv"),
             fill(folder, "s02", tmp_path / "s02-ana.csv", bumped),
             fill(folder, "s03", tmp_path / "s03.csv", lambda s, r, c, want: decimal(want)),
             fill(folder, "s04", tmp_path / "s04-late.csv",
                  lambda s, r, c, want: junk.get((s, r, c), "" if s == "h0.v" else want))]
    code, out, err = cli(capsys, "class", "grade", str(folder), *map(str, files))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"s01 (s01.csv): {n} of {n} right, 0 wrong, 0 unanswered"
    assert lines[1] == f"s02 (s02-ana.csv): {n - 2} of {n} right, 2 wrong, 0 unanswered"
    s02 = cells_of(folder, "s02")
    assert f"  h0.weights row 0 col 0 (x1, x1): given {Fraction(s02['h0.weights'][0][0]) + 1}, " \
           f"expected {s02['h0.weights'][0][0]}" in lines
    assert any(line.startswith("  h0.sums row 0 col 1 (Σ, x2): given ") for line in lines)
    assert f"s03 (s03.csv): {n} of {n} right, 0 wrong, 0 unanswered" in lines   # decimals to the places typed
    v = len(cells_of(folder, "s04")["h0.v"]) * len(cells_of(folder, "s04")["h0.v"][0])
    assert f"s04 (s04-late.csv): {n - v - 3} of {n} right, 3 wrong, {v} unanswered" in lines   # blanks are not wrong
    assert "  h0.z row 1 col 1 (1, x2): given banana, expected " + cells_of(folder, "s04")["h0.z"][1][1] in lines
    assert any(line.startswith("  h0.z row 2 col 2 (2, x3): given 1/0, expected ") for line in lines)
    assert f"class: 4 sheets marked, {4 * n - 5 - v} of {4 * n} cells right" in lines
    assert lines[-2].startswith("steps most often wrong: h0.z (2 cells)")
    assert lines[-1] == f"wrote {folder / 'grades.csv'}"
    assert [(g["student"], g["file"], g["right"], g["wrong"], g["unanswered"], g["cells"]) for g in grades(folder)] == [
        ("s01", "s01.csv", str(n), "0", "0", str(n)), ("s02", "s02-ana.csv", str(n - 2), "2", "0", str(n)),
        ("s03", "s03.csv", str(n), "0", "0", str(n)), ("s04", "s04-late.csv", str(n - v - 3), "3", str(v), str(n))]
    assert [(g["percentage"], g["hinted"]) for g in grades(folder)] == [
        ("100.0", "0"), (f"{100 * (n - 2) / n:.1f}", "0"), ("100.0", "0"), (f"{100 * (n - v - 3) / n:.1f}", "0")]


def test_decimals_are_right_to_the_places_typed_and_no_further(klass, tmp_path, capsys):
    folder = klass["by_hand"]
    weights = cells_of(folder, "s01")["h0.weights"]
    fractions = [(r, c, Fraction(w)) for r, row in enumerate(weights) for c, w in enumerate(row)
                 if Fraction(w).denominator > 1]
    r, c, f = fractions[0]
    off = f"{float(f) + 0.01:.2f}"   # a hundredth off, typed to hundredths: wrong
    typed = {(r, c): f"{float(f):.1f}", (fractions[1][0], fractions[1][1]): off}
    path = fill(folder, "s01", tmp_path / "s01.csv",
                lambda s, i, j, want: typed.get((i, j), want) if s == "h0.weights" else want)
    code, out, _ = cli(capsys, "class", "grade", str(folder), str(path))
    n = total(folder, "s01")
    assert code == 0 and out.splitlines()[0] == f"s01 (s01.csv): {n - 1} of {n} right, 1 wrong, 0 unanswered"
    assert f"given {off}, expected {fractions[1][2]}" in out


def test_masked_cells_take_minus_infinity_however_it_is_typed(klass, tmp_path, capsys):
    folder = klass["gpt_causal"]
    forms = iter(["-inf", "−∞", "-infinity", "−inf"] * 100)
    path = fill(folder, "s02", tmp_path / "s02.csv", lambda s, r, c, want: next(forms) if want == "-inf" else want)
    code, out, _ = cli(capsys, "class", "grade", str(folder), str(path))
    n = total(folder, "s02")
    assert code == 0 and out.splitlines()[0] == f"s02 (s02.csv): {n} of {n} right, 0 wrong, 0 unanswered"
    masked = [v for row in cells_of(folder, "s02")["h0.masked"] for v in row]
    assert masked.count("-inf") == 15   # six tokens, causal: the upper triangle
    nothing = fill(folder, "s01", tmp_path / "s01.csv", lambda s, r, c, want: "0" if want == "-inf" else want)
    code, out, _ = cli(capsys, "class", "grade", str(folder), str(nothing))
    assert "s01 (s01.csv): " in out and ", 15 wrong," in out and "given 0, expected -inf" in out
    rows = {g["student"]: g for g in grades(folder)}
    assert (rows["s02"]["file"], rows["s02"]["right"]) == ("s02.csv", str(n))   # graded before: its marks kept


def test_the_most_often_wrong_cells_come_first(klass, tmp_path, capsys):
    folder = klass["by_hand"]
    common, once = ("h0.scores", 1, 2), ("h0.q", 0, 0)
    files = []
    for sid in ("s01", "s02", "s03"):
        bad = {common} | ({once} if sid == "s01" else set())
        files.append(fill(folder, sid, tmp_path / f"{sid}.csv",
                          lambda s, r, c, want, bad=bad: "999" if (s, r, c) in bad else want))
    code, out, _ = cli(capsys, "class", "grade", str(folder), *map(str, files))
    line = next(x for x in out.splitlines() if x.startswith("most often wrong"))
    assert line.startswith("most often wrong (to explain again): h0.scores row 1 col 2 (x2, x3) (3 students), "
                           "h0.q row 0 col 0 (0, x1) (1 student)")
    assert "nothing from s04" in out


def test_a_saved_quiz_is_marked_like_a_sheet(klass, tmp_path, capsys):
    folder = klass["by_hand"]
    me = next(s for s in key_of(folder)["students"] if s["id"] == "s03")
    w = me["cells"]["h0.weights"]
    saved = Saved(me["name"], me["fingerprint"], "by-hand", ["h0.weights"], {
        ("h0.weights", 0, 0): {"typed": w[0][0], "state": "right", "tries": 0},
        ("h0.weights", 0, 1): {"typed": decimal(w[0][1], 2), "state": "right after a hint", "tries": 2},
        ("h0.weights", 1, 0): {"typed": "7", "state": "wrong", "tries": 1},
        ("h0.weights", 1, 1): {"typed": "", "state": "revealed", "tries": 0}})
    saved.write(tmp_path / "s03-quiz.json")
    code, out, _ = cli(capsys, "class", "grade", str(folder), str(tmp_path / "s03-quiz.json"))
    n = total(folder, "s03")
    assert code == 0
    assert out.splitlines()[0] == f"s03 (s03-quiz.json): 2 of {n} right (1 after a hint), 1 wrong, {n - 3} " \
                                  "unanswered, 1 revealed"
    row = next(g for g in grades(folder) if g["student"] == "s03")
    assert (row["right"], row["hinted"], row["percentage"]) == ("2", "1", f"{100 * 2 / n:.1f}")
    assert f"  h0.weights row 1 col 0 (x2, x1): given 7, expected {w[1][0]}" in out
    saved.write(tmp_path / "s02-quiz.json")   # s03's quiz handed in as s02's
    code, _, err = cli(capsys, "class", "grade", str(folder), str(tmp_path / "s02-quiz.json"))
    assert code == 2 and "fingerprint: the quiz answered 'by_hand-s03', not 'by_hand-s02'" in one_error_line(err)


BAD = {
    "binary": ("s01.csv", b"\x89PNG\r\n\x1a\n\x00\x00", "file: is not CSV (binary or larger than 16 MiB)"),
    "latin-1": ("s01.csv", "step,row,col,value\nh0.q,0,0,é\n".encode("latin-1"), "file: is not CSV (not UTF-8 text)"),
    "no header": ("s01.csv", b"x = 1\n", "file: is not CSV with the header step,row,col,value"),
    "no student": ("answers.csv", b"step,row,col,value\n", "ANSWERS: answers.csv names no student; expected a file"),
    "not in class": ("s09.csv", b"step,row,col,value\n", "ANSWERS: s09 is not a student of this class; expected one "
                     "of s01 … s04"),
    "no such cell": ("s01.csv", b"step,row,col,value\nh0.q,7,0,1\n", "line 2: h0.q row 7 col 0 is not a cell of s01's"),
    "no such step": ("s01.csv", b"step,row,col,value\nh9.q,0,0,1\n", "line 2: h9.q row 0 col 0 is not a cell of s01's"),
    "row not a number": ("s01.csv", b"step,row,col,value\nh0.q,a,0,1\n", "line 2: expected a step id, a row and a col"),
    "a cell twice": ("s01.csv", b"step,row,col,value\nh0.q,0,0,1\nh0.q,0,0,2\n", "line 3: h0.q row 0 col 0 is given twice"),
    "a broken quiz": ("s01-q.json", b'{"schema": "attnsim.quiz/1", "scenario": 3}', "scenario: expected a string"),
    "a field over csv's limit": ("s01.csv", b"step,row,col,value\nh0.q,0,0," + b"1" * 131_073 + b"\n",
                                 "line 2: cannot be read as CSV (field larger than field limit (131072))"),
    "a quiz nested 100 000 deep": ("s01-q.json", b'{"schema": "attnsim.quiz/1", "cells": ' + b"[" * 100_000
                                   + b"]" * 100_000 + b"}", "file: is nested too deeply"),
    "a quiz of a 5000-digit row": ("s01-q.json", b'{"schema": "attnsim.quiz/1", "scenario": "x", "fingerprint": "y", '
                                   b'"arithmetic": "by-hand", "steps": [], "cells": [{"step": "h0.q", "row": '
                                   + b"7" * 5000 + b', "col": 0, "typed": "1", "state": "right"}]}',
                                   "file: holds a number of thousands of digits"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_answers_it_refuses_in_one_line_and_no_grades_written(klass, tmp_path, capsys, case):
    folder = klass["by_hand"]
    name, body, message = BAD[case]
    (tmp_path / name).write_bytes(body)
    good = fill(folder, "s02", tmp_path / "s02.csv")
    before = (folder / "grades.csv").read_bytes() if (folder / "grades.csv").exists() else None
    code, out, err = cli(capsys, "class", "grade", str(folder), str(good), str(tmp_path / name))
    assert code == 2 and out == ""
    assert message in one_error_line(err)
    assert ((folder / "grades.csv").read_bytes() if (folder / "grades.csv").exists() else None) == before


def test_two_files_for_one_student_and_a_folder_without_a_class(klass, tmp_path, capsys):
    folder = klass["by_hand"]
    a, b = fill(folder, "s01", tmp_path / "s01.csv"), fill(folder, "s01", tmp_path / "s01-again.csv")
    code, _, err = cli(capsys, "class", "grade", str(folder), str(a), str(b))
    assert code == 2 and "two files for s01 (s01.csv and s01-again.csv)" in one_error_line(err)
    code, _, err = cli(capsys, "class", "grade", str(tmp_path), str(a))
    assert code == 2 and one_error_line(err) == f"FOLDER: {tmp_path} has no key.json; expected a class folder " \
                                               "made by attnsim class make"
    (tmp_path / "key.json").write_text('{"schema": "attnsim.class/1", "students": [{"id": "s01"}]}')
    code, _, err = cli(capsys, "class", "grade", str(tmp_path), str(a))
    assert code == 2 and "students[0]: expected id, name, fingerprint and cells" in one_error_line(err)


def test_marking_judges_as_the_quiz_judges():
    """The same answers, the same verdicts: the grader calls the quiz's own judge (tracer.answers)."""
    from tracer.answers import is_right, parse
    from tracer.classroom.grading import mark
    expected = {"id": "s01", "name": "x", "fingerprint": "", "cells": {"h0.weights": [["27/46", "-inf", "3"]]}}
    for typed, ok in (("27/46", True), ("0.59", True), ("0.587", True), ("0.58", False), ("54/92", True),
                      ("−∞", True), ("3", True), ("3.0", True), ("2.96", False)):
        cell = {(0, 0): "27/46", (0, 1): "-inf", (0, 2): "3"}
        for (r, c), want in cell.items():
            value = -math.inf if want == "-inf" else float(Fraction(want))
            try:
                quiz = is_right(parse(typed), value)
            except ValueError:
                quiz = False
            got = mark(expected, {("h0.weights", r, c): typed}, "s01.csv").right == 1
            assert got == quiz, (typed, want)
        assert ok == any(mark(expected, {("h0.weights", 0, c): typed}, "f").right for c in range(3)), typed


def test_grading_again_keeps_the_marks_of_the_students_not_in_this_batch(klass, tmp_path, capsys):
    """Monday's sheets, then Tuesday's late ones and s02's second try: one grades.csv with them all."""
    folder = tmp_path / "c"
    folder.mkdir()
    for p in klass["by_hand"].iterdir():
        if p.name != "grades.csv":
            (folder / p.name).write_bytes(p.read_bytes())
    n = total(folder, "s01")
    wrong_once = lambda step, r, c, want: "999" if (step, r, c) == ("h0.q", 0, 0) else want   # noqa: E731
    monday = [fill(folder, "s01", tmp_path / "s01.csv"), fill(folder, "s02", tmp_path / "s02.csv", wrong_once)]
    assert cli(capsys, "class", "grade", str(folder), *map(str, monday))[0] == 0
    tuesday = [fill(folder, "s02", tmp_path / "s02-again.csv"), fill(folder, "s04", tmp_path / "s04.csv", wrong_once)]
    code, out, _ = cli(capsys, "class", "grade", str(folder), *map(str, tuesday))
    assert code == 0 and out.splitlines()[0] == f"s02 (s02-again.csv): {n} of {n} right, 0 wrong, 0 unanswered"
    rows = [(g["student"], g["file"], g["right"], g["wrong"], g["percentage"]) for g in grades(folder)]
    assert rows == [("s01", "s01.csv", str(n), "0", "100.0"), ("s02", "s02-again.csv", str(n), "0", "100.0"),
                    ("s03", "", "", "", ""), ("s04", "s04.csv", str(n - 1), "1", f"{100 * (n - 1) / n:.1f}")]
    with (folder / "grades.csv").open(encoding="utf-8") as f:
        assert f.readline().strip() == "student,file,right,wrong,unanswered,cells,percentage,hinted"


def test_an_earlier_grades_csv_of_another_shape_is_merged_or_refused(klass, tmp_path, capsys):
    folder = tmp_path / "c"
    folder.mkdir()
    for p in klass["by_hand"].iterdir():
        if p.name != "grades.csv":
            (folder / p.name).write_bytes(p.read_bytes())
    (folder / "grades.csv").write_text("student,file,right,wrong,unanswered,cells\ns03,s03.csv,7,1,0,8\n")
    assert cli(capsys, "class", "grade", str(folder), str(fill(folder, "s01", tmp_path / "s01.csv")))[0] == 0
    s03 = next(g for g in grades(folder) if g["student"] == "s03")   # an older file: its marks kept
    assert (s03["file"], s03["right"], s03["cells"], s03["percentage"], s03["hinted"]) == ("s03.csv", "7", "8", "", "")
    (folder / "grades.csv").write_bytes(b"\x00\xff not a table")
    code, _, err = cli(capsys, "class", "grade", str(folder), str(tmp_path / "s01.csv"))
    assert code == 2 and one_error_line(err) == f"{folder / 'grades.csv'}: grades.csv: cannot be read as CSV with a " \
        "student column; expected the grades.csv attnsim class grade wrote (move it away to start anew)"
    assert (folder / "grades.csv").read_bytes() == b"\x00\xff not a table"
