"""The dialogs and views behind d, s, o, e and ctrl+p, and bad input: a broken scenario shows its
one-line error and the previous one stays open, at start-up too."""
import json
import math

import numpy as np
from textual.widgets import Input

from tui.screens.diff import DiffScreen, top_keys_changed
from tui.screens.export import ExportScreen
from tui.screens.main import MainScreen
from tui.screens.picker import PickerScreen
from tui.screens.settings import SettingsScreen
from tui.widgets.matrix import MatrixView

from tui_helpers import BROKEN, drawn, go_to, opened, pilot_test, screen_text, settle, status_text


def test_top_keys_changed_names_ties():
    a = np.array([[0.5, 0.5, 0.0], [0.2, 0.7, 0.1]])
    b = np.array([[0.6, 0.3, 0.1], [0.1, 0.8, 0.1]])
    assert top_keys_changed(a, b) == [(0, [0, 1], [0])]


@pilot_test
async def test_diff_shows_both_arithmetics_their_difference_and_flags():
    async with opened() as (app, pilot):
        await go_to(pilot, "h0.weights")
        await pilot.press("d")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DiffScreen)
        await pilot.pause()
        a, b, delta = (drawn(screen.query_one(f"#{i}", MatrixView)) for i in ("side-a", "side-b", "delta"))
        assert a[2][1] == "27/46"                                  # key x2, query x1 by hand
        exact = float(b[2][1])
        assert abs(float(delta[2][1].replace("−", "-")) - (27 / 46 - exact)) < 5e-3
        # by hand, q2's weights tie on x1, x2, x4 (9/28 each); exact picks x2 alone
        assert "⚑x2" in a[0]
        assert "query x2: keys x1, x2, x4 (tied) under A, key x2 under B" in screen_text(app)
        await pilot.press("n")                                     # on to z, still compared
        assert screen.step_id == "h0.z"
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen) and app.screen.step_id == "h0.z"


@pilot_test
async def test_settings_change_one_key():
    async with opened(size=(80, 24)) as (app, pilot):
        await go_to(pilot, "h0.scaled")
        await pilot.press("s")
        assert isinstance(app.screen, SettingsScreen)
        await pilot.press("tab", "ctrl+u", *"sqrt", "enter")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        assert "by-hand + scale=sqrt" in status_text(app)
        shown = drawn(app.screen.query_one("#current", MatrixView))[1][1]   # S[k1, q1] = 3, ÷√3
        assert abs(float(shown) - 3 / math.sqrt(3)) < 5e-3


@pilot_test
async def test_settings_bad_value_stays_in_the_dialog():
    async with opened(size=(80, 24)) as (app, pilot):
        await pilot.press("s", "tab", "ctrl+u", *"banana", "enter")
        await pilot.pause()
        assert isinstance(app.screen, SettingsScreen)
        assert "scale: expected sqrt, floor, none or a number" in screen_text(app)
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen) and "arithmetic by-hand (" in status_text(app)


@pilot_test
async def test_settings_mask_adds_the_masked_step():
    async with opened() as (app, pilot):
        app.screen.set_option("mask", "causal")
        await settle(pilot)
        assert "h0.masked" in app.screen.trace and "mask=causal" in status_text(app)


@pilot_test
async def test_picker_opens_a_builtin_and_a_broken_file_keeps_the_old_one(scenario_file):
    broken = scenario_file("broken.toml", BROKEN)
    async with opened() as (app, pilot):
        await go_to(pilot, "h0.k")
        await pilot.press("o")
        assert isinstance(app.screen, PickerScreen)
        app.screen.query_one("#path").value = broken
        await pilot.press("enter")                         # the path's line has the keys from the start
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        text = status_text(app)
        assert "error:" in text and "broken.toml: x[1]: expected 2 numbers" in text
        assert "scenario by_hand" in text and app.screen.step_id == "h0.k"
        assert "Traceback" not in screen_text(app)
        await pilot.press("o")
        options = app.screen.query_one("#builtins")
        names = [options.get_option_at_index(i).id for i in range(options.option_count)]
        options.highlighted = names.index("by_hand")
        await pilot.press("enter")                         # a built-in opens on its first step
        await settle(pilot)
        assert "scenario by_hand" in status_text(app) and app.screen.step_id == "x"
        assert "error" not in status_text(app)


@pilot_test
async def test_broken_file_at_start_up_falls_back_to_by_hand(scenario_file):
    broken = scenario_file("broken.toml", BROKEN)
    async with opened(broken) as (app, pilot):
        text = status_text(app)
        assert "scenario by_hand" in text and "broken.toml" in text and "opened by_hand instead" in text
    async with opened("no_such_scenario", "exact") as (app, pilot):
        assert "scenario by_hand" in status_text(app) and "no_such_scenario" in status_text(app)


@pilot_test
async def test_export_writes_the_trace(tmp_path):
    target = tmp_path / "out.json"
    async with opened() as (app, pilot):
        await go_to(pilot, "h0.weights")
        await pilot.press("e")
        assert isinstance(app.screen, ExportScreen)
        app.screen.query_one("#path").value = str(target)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        doc = json.loads(target.read_text(encoding="utf-8"))
        weights = next(s for s in doc["steps"] if s["id"] == "h0.weights")
        np.testing.assert_allclose([row[0] for row in weights["data"]], [9 / 46, 27 / 46, 1 / 46, 9 / 46], rtol=1e-12)


@pilot_test
async def test_export_error_stays_in_the_dialog(tmp_path):
    async with opened() as (app, pilot):
        await pilot.press("e")
        app.screen.query_one("#path").value = str(tmp_path / "no" / "such" / "dir" / "t.json")
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, ExportScreen)
        message = str(app.screen.query_one("#error").render())
        assert message and "writing" not in message and "Traceback" not in screen_text(app)
        assert not (tmp_path / "no").exists()


@pilot_test
async def test_palette_goes_to_a_step_and_sets_an_option():
    async def run(query: str) -> None:
        await pilot.press("ctrl+p")
        await pilot.pause()
        app.screen.query_one(Input).value = query          # what a person would type
        await pilot.pause(0.3)
        await pilot.press("enter")
        await settle(pilot)

    async with opened() as (app, pilot):
        await run("go to step h0.sums")
        assert app.screen.step_id == "h0.sums"
        await run("softmax_base=2")
        assert "softmax_base=2" in status_text(app) and app.screen.step_id == "h0.sums"
        await run("open scenario by_hand")
        assert app.screen.step_id == "x"


@pilot_test
async def test_a_2048_token_step_scrolls_with_its_labels(scenario_file):
    big = scenario_file("big.toml", "layout = \"rows\"\n[random]\nseed = 1\ntokens = 2048\nd_model = 16\nd_k = 4\n")
    async with opened(big) as (app, pilot):
        await go_to(pilot, "h0.scores")
        view = app.screen.query_one("#current", MatrixView)
        await pilot.press("end", "pagedown", "pagedown", "j")
        await settle(pilot)
        row, col = app.screen.cell
        assert col == 2047 and row > 20
        lines = drawn(view)
        assert lines[0][-1] == "t2048"
        assert any(line and line[0] == f"t{row + 1}" for line in lines[1:])
        assert f"h0.scores[query t{row + 1}, key t2048]" in screen_text(app)
