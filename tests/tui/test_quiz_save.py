"""`attnsim quiz SCENARIO --save FILE`: answers written as they are judged, the quiz resumed from
the same FILE (in Pilot and in a real terminal), a FILE of another scenario refused in one line;
and `o` opening a student's sheet from a class, with the key's numbers on screen."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import tracer
from tracer.classroom import printing
from tracer.classroom.make import make_class
from tui.quiz_save import open_saved
from tui.screens.picker import PickerScreen

from tui_helpers import opened, pilot_test, settle, status_text, terminal

WEIGHTS = [["9/46", "9/28", "9/22", "1/12"], ["27/46", "9/28", "3/22", "3/4"],
           ["1/46", "1/28", "1/22", "1/12"], ["9/46", "9/28", "9/22", "1/12"]]   # the classroom sheet, key × query


async def type_in(pilot, text: str) -> None:
    await pilot.press(*list(text), "enter")
    await settle(pilot)


def saved_cells(path: Path) -> dict:
    doc = json.loads(path.read_text(encoding="utf-8"))
    return {(c["step"], c["row"], c["col"]): (c["typed"], c["state"], c["tries"]) for c in doc["cells"]}


@pilot_test
async def test_answers_are_saved_as_typed_and_resumed(tmp_path):
    path = tmp_path / "ana.json"
    scenario = tracer.load_scenario("by_hand")
    save = open_saved(path, scenario)
    assert json.loads(path.read_text())["cells"] == []   # written at once: a bad path is said before the quiz
    async with opened("by_hand", None, None, ["h0.weights"], save, size=(120, 36)) as (app, pilot):
        await pilot.press("down")
        await type_in(pilot, "0.58")                                 # wrong, then right after the hint
        assert saved_cells(path)[("h0.weights", 1, 0)] == ("0.58", "wrong", 1)
        await type_in(pilot, "27/46")                                # right: the cursor moves on to (1, 1)
        await pilot.press("left", "up")
        await type_in(pilot, "0.196")                                 # 9/46 to the places typed; on to (0, 1)
        await pilot.press("ctrl+r")                                   # revealed
        await settle(pilot)
        assert "2 of 16" in status_text(app)
    cells = saved_cells(path)
    assert cells == {("h0.weights", 1, 0): ("27/46", "right after a hint", 1),
                     ("h0.weights", 0, 0): ("0.196", "right", 0), ("h0.weights", 0, 1): ("", "revealed", 0)}
    doc = json.loads(path.read_text())
    assert doc["scenario"] == "by_hand" and doc["arithmetic"] == "by-hand" and doc["steps"] == ["h0.weights"]
    again = open_saved(path, tracer.load_scenario("by_hand"))
    async with opened("by_hand", None, None, ["h0.weights"], again, size=(120, 36)) as (app, pilot):
        quiz = app.screen.quiz
        assert quiz.progress("h0.weights") == (2, 16) and quiz.revealed("h0.weights") == 1
        assert quiz.tries[("h0.weights", 1, 0)] == 1
        assert f"quiz resumed from {path}: 3 cells answered before" in status_text(app)
        assert app.screen.cell == (0, 2)                              # the first cell still to find
        assert app.screen.query_one("#current").cell_text(1, 0) == "27/46"
        await type_in(pilot, WEIGHTS[0][2])
    assert saved_cells(path)[("h0.weights", 0, 2)] == ("9/22", "right", 0) and len(saved_cells(path)) == 4


def test_a_file_of_another_scenario_or_not_a_quiz_is_refused_in_one_line(tmp_path, capsys):
    from test_cli_errors import cli, one_error_line
    path = tmp_path / "ana.json"
    open_saved(path, tracer.load_scenario("by_hand"))
    before = path.read_bytes()
    code, out, err = cli(capsys, "quiz", "gpt_causal", "--save", str(path))
    assert code == 2 and out == ""
    assert one_error_line(err) == f"--save: {path} holds the answers of 'by_hand', another scenario (other numbers); " \
                                  "expected the saved quiz of 'gpt_causal', or a new FILE"
    sheet = tmp_path / "s01.csv"
    sheet.write_text("step,row,col,value\n")
    code, _, err = cli(capsys, "quiz", "by_hand", "--save", str(sheet))
    assert code == 2 and one_error_line(err).startswith(f"{sheet}: file: is not a quiz's saved answers")
    code, _, err = cli(capsys, "quiz", "by_hand", "--save", str(tmp_path / "no" / "ana.json"))
    assert code == 2 and one_error_line(err).startswith("--save: the folder ")
    assert path.read_bytes() == before and sheet.read_text() == "step,row,col,value\n"


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux for a real terminal")
def test_save_and_resume_in_a_real_terminal(tmp_path):
    path = tmp_path / "ana.json"
    for typed, seen in (("0.59", "1 of 16 cells"), (WEIGHTS[2][1], "resumed")):
        with terminal("save", "quiz", "by_hand", "--step", "h0.weights", "--save", str(path)) as term:
            term.wait_for("answer ▸")
            if seen == "resumed":
                term.wait_for(seen)
                term.send("Down", "Down", "Right", typed, "Enter")
                term.wait_for("2 of 16 cells")
            else:
                term.send("Down", typed, "Enter")
                term.wait_for(seen)
            term.send("C-q")
    assert saved_cells(path) == {("h0.weights", 1, 0): ("0.59", "right", 0), ("h0.weights", 2, 1): ("1/28", "right", 0)}


@pilot_test
async def test_o_opens_a_students_sheet_with_the_keys_numbers(tmp_path, monkeypatch):
    monkeypatch.setattr(printing, "write_pdf", lambda path, pages: Path(path).write_bytes(b"%PDF-"))
    folder = make_class("gpt_causal", 2, tmp_path / "class", seed=4).folder
    key = json.loads((folder / "key.json").read_text())["students"][1]
    async with opened(size=(120, 36)) as (app, pilot):
        await pilot.press("o")
        assert isinstance(app.screen, PickerScreen)
        app.screen.query_one("#path").value = str(folder / "s02.toml")
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert screen.trace.scenario.name == "gpt_causal-s02" and screen.trace.arithmetic.preset == "by-hand"
        assert "gpt_causal-s02" in status_text(app)
        screen.go("h0.weights")
        await settle(pilot)
        view = screen.query_one("#current")
        for r, row in enumerate(key["cells"]["h0.weights"]):
            for c, want in enumerate(row):
                assert view.cell_text(r, c) == want, (r, c)
