"""The quiz, the worksheet and the heads overview driven by keys, as a student would: right, wrong,
approximate and junk answers; blanks that fill as `n` steps; Enter on a head. Values written here."""
import shutil

import pytest

from tui.screens.heads import HeadsScreen
from tui.widgets.cell_info import CellInfo
from tui.widgets.worksheet import Worksheet

from tui_helpers import TWO_HEADS, drawn, opened, pilot_test, settle, status_text, terminal

SUMS = ["46/3", "28/3", "22/3", "12"]   # the classroom sheet's sums of powers, one per query


async def type_in(pilot, text: str) -> None:
    await pilot.press(*list(text), "enter")
    await settle(pilot)


def cells(view) -> list[str]:
    """The drawn cells of a matrix view (its labels dropped)."""
    return [word for line in drawn(view)[1:] for word in line[1:]]


@pilot_test
async def test_right_wrong_approximate_and_junk_answers():
    async with opened("by_hand", None, None, ["h0.weights"], size=(120, 36)) as (app, pilot):
        screen = app.screen
        assert (screen.step_id, screen.cell) == ("h0.weights", (0, 0))
        assert set(cells(screen.query_one("#current"))) == {"?"}
        await pilot.press("down")                       # key k2, query q1: 27/46
        assert screen.cell == (1, 0)
        await type_in(pilot, "0.58")
        status = status_text(app)
        assert "✗" in status and "9 ÷ (46/3)" in status and "27/46" not in status and "0.587" not in status
        assert "0 of 16" in status
        await type_in(pilot, "0.57")
        finer = status_text(app)
        assert "✗" in finer and "9 × 3/46" in finer and "too small" in finer
        await type_in(pilot, "0.59")
        assert "✓" in status_text(app) and "1 of 16 cells" in status_text(app)
        assert screen.query_one("#current").cell_text(1, 0) == "27/46"
        assert screen.cell == (1, 1)                    # right: on to the next cell still to find
        await pilot.press("left", "up")
        for junk in ("abc", "1/0", "hello", "q"):          # letters go to the answer, not to commands
            await type_in(pilot, junk)
            assert "27/46" in status_text(app) and "0.59" in status_text(app), junk   # the accepted forms
        assert app.is_running and screen.step_id == "h0.weights"
        await type_in(pilot, "9/46")
        assert "✓" in status_text(app) and "2 of 16" in status_text(app) and screen.cell == (0, 1)
        await pilot.press("down", "down")                  # k3, q2: 1/28
        await type_in(pilot, "0.036")
        assert "✓" in status_text(app)


@pilot_test
async def test_a_finished_step_opens_the_next_and_the_end_sums_up():
    async with opened("by_hand", None, None, ["h0.sums", "h0.weights"], size=(120, 36)) as (app, pilot):
        screen = app.screen
        assert screen.step_id == "h0.sums"
        for n, value in enumerate(SUMS):
            assert screen.cell == (0, n)                      # each right answer moves on to the next
            await type_in(pilot, value)
            if n < 3:
                assert f"{n + 1} of 4" in status_text(app)
        assert "on to h0.weights" in status_text(app)
        assert (screen.step_id, screen.cell) == ("h0.weights", (0, 0))
        await type_in(pilot, "1")                             # wrong: 9/46
        for _ in range(16):
            await pilot.press("ctrl+r", "tab")
            await settle(pilot)
        status = status_text(app)
        assert "quiz complete" in status and "4 right first time" in status and "16 revealed" in status
        assert "most mistakes in h0.weights (1)" in status


@pilot_test
async def test_the_worksheet_fills_as_n_steps():
    async with opened("by_hand", size=(160, 60)) as (app, pilot):
        await pilot.press("w")
        await settle(pilot)
        sheet = app.screen.query_one(Worksheet)
        assert sheet.display and set(sheet.views) >= {"x", "h0.q", "h0.k", "h0.v", "h0.scores", "h0.weights"}
        order = ["x", "h0.q", "h0.k", "h0.v", "h0.scores", "h0.scaled", "h0.exp", "h0.sums", "h0.weights", "h0.z"]
        for n, current in enumerate(order):
            assert app.screen.step_id == current
            for sid in order:
                drawn_cells = cells(sheet.views[sid])
                if order.index(sid) <= n:
                    assert drawn_cells, f"{sid} should be filled at {current}"
                else:
                    assert drawn_cells == [], f"{sid} should be blank at {current}"
            await pilot.press("n")
            await settle(pilot)
        assert cells(sheet.views["h0.sums"]) == SUMS
        assert app.screen.focused is sheet.views["h0.z"]
        await pilot.press("p", "down")               # the weights panel, key k2, query q1
        await settle(pilot)
        assert app.screen.step_id == "h0.weights" and app.screen.cell == (1, 0)
        assert "27/46" in str(app.screen.query_one(CellInfo).render())


@pilot_test
async def test_the_worksheet_in_a_quiz_is_the_sheet_to_fill():
    async with opened("by_hand", None, None, [], size=(160, 60)) as (app, pilot):
        await pilot.press("escape", "w")
        await settle(pilot)
        sheet = app.screen.query_one(Worksheet)
        assert set(cells(sheet.views["h0.q"])) == {"?"} and "?" not in cells(sheet.views["x"])
        await pilot.press("2", "enter")              # h0.q[0, x1] = 1·2 + 1·0 = 2
        await settle(pilot)
        assert "✓" in status_text(app) and cells(sheet.views["h0.q"])[0] == "2"


@pilot_test
async def test_heads_overview_enter_opens_a_head(scenario_file):
    path = scenario_file("two.toml", TWO_HEADS)
    async with opened(path, size=(100, 30)) as (app, pilot):
        await pilot.press("m")
        await settle(pilot)
        assert isinstance(app.screen, HeadsScreen)
        await pilot.press("right", "enter")
        await settle(pilot)
        assert app.screen.head == 1 and app.screen.step_id == "h1.weights"


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux for a real terminal")
def test_a_student_in_a_real_terminal():
    with terminal("quiz", "quiz", "by_hand", "--step", "h0.weights") as term:
        term.wait_for("answer ▸")
        term.send("Down", "0.58", "Enter")
        assert "9 ÷ (46/3)" in term.wait_for("✗")
        term.send("0.59", "Enter")
        term.wait_for("1 of 16 cells")
        term.send("C-q")


@pilot_test
async def test_huge_tiny_and_non_finite_answers_never_end_the_quiz():
    async with opened("by_hand", None, None, ["h0.weights"], size=(120, 36)) as (app, pilot):
        screen = app.screen
        for text in ("1e309", "1e309", "-1e309", "1e308", "1e308", "1e-320", "1e-320", "9" * 39, "inf", "-inf",
                     "nan", "1e400", "0"):
            await type_in(pilot, text)
            assert app.is_running and screen.step_id == "h0.weights", text
            assert status_text(app), text   # judged (✗ and a hint) or refused, in the status line
        assert "out of range" in (await _typed(pilot, app, "1e309"))


async def _typed(pilot, app, text: str) -> str:
    await type_in(pilot, text)
    return status_text(app)


@pilot_test
async def test_a_right_answer_moves_the_cursor_on_and_a_wrong_one_leaves_it():
    """CONTRACT §12: after a right answer the cursor goes to the step's next cell still to find
    (row by row, from the first again after the last, over the cells found); after a wrong one
    it stays, for another try."""
    async with opened("by_hand", None, None, ["h0.sums"], size=(120, 36)) as (app, pilot):
        screen = app.screen
        await pilot.press("right", "right")
        await type_in(pilot, "1")                       # wrong: stays for another try
        assert "✗" in status_text(app) and screen.cell == (0, 2)
        await type_in(pilot, SUMS[2])
        assert "✓" in status_text(app) and screen.cell == (0, 3)
        await type_in(pilot, SUMS[3])                   # the last cell: back to the first still hidden
        assert screen.cell == (0, 0)
        await type_in(pilot, SUMS[0])
        assert screen.cell == (0, 1)
        await pilot.press("ctrl+r")                     # a reveal is no answer: the step is done, nothing left
        await settle(pilot)
        assert "quiz complete" in status_text(app)
