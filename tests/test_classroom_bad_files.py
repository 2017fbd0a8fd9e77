"""A class's files as a hostile or careless world hands them back: keys, answer sheets and saved
quizzes that are huge, deep, devices or pipes, cells beyond any float, names with terminal escapes
and bidi controls, labels that a spreadsheet would run as formulas. Each is one line and exit 2 (or
marked as written), never a traceback, a hang or a forged line; grades.csv is left as it was."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_classroom_grade import cells_of, fill, grades, key_of, total
from test_cli_errors import cli, one_error_line
from tracer.classroom import printing
from tracer.classroom.make import make_class

DEEP = "[" * 100_000 + "]" * 100_000
DIGITS = "7" * 5000


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A class of three by_hand sheets (no PDFs: not read here)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(printing, "write_pdf", lambda path, pages: Path(path).write_bytes(b"%PDF-"))
        return make_class("by_hand", 3, tmp_path_factory.mktemp("hostile") / "c", seed=8).folder


@pytest.fixture
def copy(folder, tmp_path):
    """A copy of the class whose key a test may spoil."""
    mine = tmp_path / "c"
    mine.mkdir()
    for p in folder.iterdir():
        (mine / p.name).write_bytes(p.read_bytes())
    return mine


def attnsim(*argv, timeout=120) -> subprocess.CompletedProcess:
    """The CLI in a process of its own: a read that hangs (a FIFO) is killed, not waited for."""
    return subprocess.run([sys.executable, "-m", "tui", *argv], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


# ---------------------------------------------------------------- keys

def spoil(key: dict, change) -> dict:
    change(key)
    return key


KEYS = {   # how key.json is spoilt → a piece of the one line it must give
    "a cell of a huge exponent": (lambda k: k["students"][0]["cells"]["h0.q"][0].__setitem__(0, "1e50000000"),
                                  "students[0].cells.h0.q[0][0]: expected an exact value within float64's range"),
    "a cell of a large exponent": (lambda k: k["students"][0]["cells"]["h0.q"][0].__setitem__(0, "1e5000"),
                                   "students[0].cells.h0.q[0][0]: expected an exact value"),
    "a cell beyond float64": (lambda k: k["students"][1]["cells"]["h0.z"][1].__setitem__(1, "1" + "0" * 320),
                              "students[1].cells.h0.z[1][1]: expected an exact value within float64's range"),
    "a cell that is a word": (lambda k: k["students"][0]["cells"]["h0.q"][0].__setitem__(0, "three"),
                              "students[0].cells.h0.q[0][0]: expected an exact value"),
    "a cell that is a number": (lambda k: k["students"][0]["cells"]["h0.q"][0].__setitem__(0, 3),
                                "students[0].cells.h0.q[0][0]: expected an exact value"),
    "an id that is a formula": (lambda k: k["students"][1].__setitem__("id", '=HYPERLINK("http://x","s02")'),
                                "students[1].id: expected a student's id as class make gives them, s01, s02"),
    "an id twice": (lambda k: k["students"][1].__setitem__("id", "s01"), "students[1].id: expected a student's id"),
    "labels not a table": (lambda k: k.__setitem__("labels", [1, 2]), "labels: expected each step's row and column"),
}


@pytest.mark.parametrize("case", sorted(KEYS))
def test_a_spoilt_key_is_one_line_and_grades_are_left_as_they_were(copy, tmp_path, capsys, case):
    answers = fill(copy, "s01", tmp_path / "s01.csv")
    assert cli(capsys, "class", "grade", str(copy), str(answers))[0] == 0
    before = (copy / "grades.csv").read_bytes()
    change, message = KEYS[case]
    (copy / "key.json").write_text(json.dumps(spoil(key_of(copy), change)), encoding="utf-8")
    code, out, err = cli(capsys, "class", "grade", str(copy), str(answers))
    assert code == 2 and out == ""
    assert message in one_error_line(err)
    assert (copy / "grades.csv").read_bytes() == before


@pytest.mark.parametrize("body, message", [
    ('{"schema": "attnsim.class/1", "students": ' + DEEP + "}", "file: is nested too deeply"),
    ('{"schema": "attnsim.class/1", "seed": ' + DIGITS + ', "students": []}', "file: holds a number of thousands"),
    ("{", "file: is not JSON (Expecting property name"),
], ids=["deep", "digits", "broken"])
def test_a_key_too_deep_or_of_thousands_of_digits(copy, tmp_path, capsys, body, message):
    answers = fill(copy, "s01", tmp_path / "s01.csv")
    (copy / "key.json").write_text(body)
    code, _, err = cli(capsys, "class", "grade", str(copy), str(answers))
    assert code == 2 and message in one_error_line(err)


def test_a_key_that_is_a_device_a_huge_file_or_a_pipe(copy, tmp_path, capsys):
    answers = fill(copy, "s01", tmp_path / "s01.csv")
    key = copy / "key.json"
    key.unlink()
    key.symlink_to("/dev/zero")
    code, _, err = cli(capsys, "class", "grade", str(copy), str(answers))
    assert code == 2 and one_error_line(err) == f"{key}: file: is not a regular file (a device, pipe or socket); " \
                                               "expected a class's key (the key.json attnsim class make wrote)"
    key.unlink()
    with open(key, "wb") as f:
        f.truncate(17 * 2**20)   # sparse: nothing written
    code, _, err = cli(capsys, "class", "grade", str(copy), str(answers))
    assert code == 2 and "file: is larger than 16 MiB" in one_error_line(err)
    key.unlink()
    os.mkfifo(key)
    done = attnsim("class", "grade", str(copy), str(answers))
    assert done.returncode == 2 and "file: is not a regular file" in done.stderr and "Traceback" not in done.stderr


# ---------------------------------------------------------------- answers files and saved quizzes

def test_answers_that_are_a_pipe_or_a_device(folder, tmp_path, capsys):
    fifo = tmp_path / "s01.csv"
    os.mkfifo(fifo)
    done = attnsim("class", "grade", str(folder), str(fifo))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"attnsim: error: {fifo}: file: is not a regular file (a device, pipe or socket); expected " \
                          "the student's filled answer sheet (step,row,col,value) or saved quiz\n"
    (tmp_path / "s02.csv").symlink_to("/dev/zero")
    code, _, err = cli(capsys, "class", "grade", str(folder), str(tmp_path / "s02.csv"))
    assert code == 2 and "file: is not a regular file" in one_error_line(err)


def test_a_sheet_with_cr_line_ends_is_marked(folder, tmp_path, capsys):
    """An old spreadsheet's CSV: \\r alone ends each line (and a quoted value keeps its own)."""
    sheet = fill(folder, "s02", tmp_path / "s02.csv")
    sheet.write_bytes(sheet.read_bytes().replace(b"\r\n", b"\r"))
    assert b"\n" not in sheet.read_bytes()
    code, out, err = cli(capsys, "class", "grade", str(folder), str(sheet))
    n = total(folder, "s02")
    assert code == 0 and err == "" and out.splitlines()[0] == f"s02 (s02.csv): {n} of {n} right, 0 wrong, 0 unanswered"


@pytest.mark.parametrize("typed", ["1e50000000", "9" * 40, "1" * 5000, "-1e-99999999", "1/" + "0" * 39])
def test_huge_answers_are_judged_wrong_at_once(folder, tmp_path, capsys, typed):
    sheet = fill(folder, "s03", tmp_path / "s03.csv", lambda s, r, c, want: typed if (s, r, c) == ("h0.z", 0, 0)
                 else want)
    code, out, _ = cli(capsys, "class", "grade", str(folder), str(sheet))
    n = total(folder, "s03")
    assert code == 0 and out.splitlines()[0] == f"s03 (s03.csv): {n - 1} of {n} right, 1 wrong, 0 unanswered"


# ---------------------------------------------------------------- what the report prints

@pytest.mark.parametrize("name, shown", [
    ("s01\x1b[2K\x1b[1A\rs01: 116 of 116 right.csv", "s01\\x1b[2K\\x1b[1A\\rs01: 116 of 116 right.csv"),
    ("s01-\u202evsc.txt", "s01-\\u202evsc.txt"),
    ("s01-\u2066x\u2069.csv", "s01-\\u2066x\\u2069.csv"),
])
def test_a_file_name_is_printed_escaped(folder, tmp_path, capsys, name, shown):
    sheet = fill(folder, "s01", tmp_path / name, lambda s, r, c, want: "999" if (s, r, c) == ("h0.q", 0, 0) else want)
    code, out, err = cli(capsys, "class", "grade", str(folder), str(sheet))
    n = total(folder, "s01")
    assert code == 0 and err == ""
    assert out.splitlines()[0] == f"s01 ({shown}): {n - 1} of {n} right, 1 wrong, 0 unanswered"
    assert not any(ch in out for ch in "\x1b\r\u202e\u2066\u2069")


# ---------------------------------------------------------------- spreadsheets

FORMULAS = """
tokens = ["=1+1", "+A1", "-2", "@SUM(A1)"]
features = ["=cmd|' /C calc'!A0", "-f"]
mask = "causal"
arithmetic = "by-hand"
x = [[1, 0], [0, 1], [1, 1], [2, -1]]
[weights]
q = [[1, 0], [0, 1]]
k = [[1, 1], [0, 1]]
v = [[1, 0], [0, -1]]
"""
ARMED = set("=+-@\t\r")


def text_cells(path: Path) -> list[str]:
    with path.open(encoding="utf-8", newline="") as f:
        return [cell for row in list(csv.reader(f))[1:] for cell in row[4:]]


def test_labels_are_disarmed_in_sheets_and_exports_and_marked_all_the_same(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(printing, "write_pdf", lambda path, pages: Path(path).write_bytes(b"%PDF-"))
    (tmp_path / "f.toml").write_text(FORMULAS)
    klass = make_class(str(tmp_path / "f.toml"), 2, tmp_path / "c", seed=3).folder
    labels = text_cells(klass / "s01.csv")
    assert "'=1+1" in labels and "'@SUM(A1)" in labels and "'-2" in labels and "'+A1" in labels
    assert not any(t[0] in ARMED for t in labels if t)
    sheet = fill(klass, "s01", tmp_path / "s01.csv")
    code, out, _ = cli(capsys, "class", "grade", str(klass), str(sheet))
    n = total(klass, "s01")
    assert code == 0 and out.splitlines()[0] == f"s01 (s01.csv): {n} of {n} right, 0 wrong, 0 unanswered"
    assert cli(capsys, "export", str(tmp_path / "f.toml"), "-o", str(tmp_path / "t.csv"))[0] == 0
    exported = text_cells(tmp_path / "t.csv")
    assert "'+A1" in exported and "'-f" in exported and "'=cmd|' /C calc'!A0" in exported and not any(t[0] in ARMED for t in exported if t)
    with (tmp_path / "t.csv").open(encoding="utf-8", newline="") as f:
        values = {(r["step"], r["row"], r["col"]): r["value"] for r in csv.DictReader(f)}
    assert values[("given/x", "3", "1")] == "-1.0" and values[("h0.v", "3", "1")] == "1.0"   # numbers stay numbers
    assert values[("h0.v", "1", "1")] == "-1.0"


def test_grades_csv_disarms_what_an_earlier_one_held(copy, tmp_path, capsys):
    (copy / "grades.csv").write_text('student,file,right,wrong,unanswered,cells\ns02,=HYPERLINK("x"),1,2,3,4\n')
    code, _, _ = cli(capsys, "class", "grade", str(copy), str(fill(copy, "s01", tmp_path / "s01.csv")))
    assert code == 0
    rows = {g["student"]: g for g in grades(copy)}
    assert rows["s02"]["file"] == "'=HYPERLINK(\"x\")" and rows["s02"]["right"] == "1"
    assert rows["s01"]["right"] == str(total(copy, "s01")) and rows["s03"]["file"] == ""


def test_the_key_cells_stay_exact_after_reading(folder):
    from tracer.classroom.grading import load_key
    assert load_key(folder)["students"][0]["cells"] == cells_of(folder, "s01")


# ---------------------------------------------------------------- quiz --save

def test_quiz_save_refuses_an_empty_name_a_device_and_a_pipe(tmp_path, capsys, monkeypatch):
    import tui.app
    opened = []
    monkeypatch.setattr(tui.app, "run_app", lambda *args, **kw: opened.append(args))
    for name in ("", " "):
        code, out, err = cli(capsys, "quiz", "by_hand", "--save", name)
        assert code == 2 and out == "" and opened == []
        assert one_error_line(err) == f"--save: expected a file name for the answers (such as s01-quiz.json), " \
                                      f"got {name!r}"
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    code, _, err = cli(capsys, "quiz", "by_hand", "--save", str(tmp_path / "zero.json"))
    assert code == 2 and opened == []
    assert one_error_line(err) == f"{tmp_path / 'zero.json'}: file: is not a regular file (a device, pipe or " \
                                  "socket); expected the file attnsim quiz --save wrote"
    (tmp_path / "deep.json").write_text('{"schema": "attnsim.quiz/1", "cells": ' + DEEP + "}")
    code, _, err = cli(capsys, "quiz", "by_hand", "--save", str(tmp_path / "deep.json"))
    assert code == 2 and one_error_line(err).endswith("deep.json: file: is nested too deeply; expected the file "
                                                      "attnsim quiz --save wrote")
    os.mkfifo(tmp_path / "pipe.json")
    done = attnsim("quiz", "by_hand", "--save", str(tmp_path / "pipe.json"))
    assert done.returncode == 2 and done.stderr.startswith(f"attnsim: error: {tmp_path / 'pipe.json'}: file: is not "
                                                           "a regular file")


BIDI = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))]   # LRE … RLO, LRI … PDI


@pytest.mark.parametrize("mark", BIDI, ids=[f"U+{ord(c):04X}" for c in BIDI])
def test_every_bidi_control_is_escaped_wherever_text_is_shown(tmp_path, capsys, mark):
    """Trojan-source reordering: a bidi control shows what follows it backwards; escaped as \\u202e."""
    from tracer.errors import one_line
    assert one_line(f"s01{mark}vsc.csv") == f"s01\\u{ord(mark):04x}vsc.csv"
    missing = tmp_path / f"by{mark}hand.toml"
    code, _, err = cli(capsys, "show", str(missing))
    assert code == 2 and mark not in err and f"\\u{ord(mark):04x}" in one_error_line(err)
