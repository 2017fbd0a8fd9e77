"""`M`: the model view of a checkpoint's scenario: every layer's kind and memory over its heads'
tiles at 80 × 24 (scrolling), `s` sorting each layer's heads by a role score, Enter opening that
layer at that head; a hand-written scenario has no model, and says so in the status line."""
import shutil
import time

import numpy as np
import pytest

import tracer
from tui.screens.model import ModelScreen

from tui_helpers import opened, pilot_test, screen_text, settle, status_text, terminal, until

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")


@pilot_test
async def test_the_model_view_sorts_and_opens_a_head_of_another_layer():
    async with opened("induction", size=(80, 24)) as (app, pilot):   # layer 1 of the shipped model, head 0
        await pilot.press("M")
        await settle(pilot)
        view = app.screen
        assert isinstance(view, ModelScreen)
        text = screen_text(app)
        assert "layer 0 · full · 4/4 heads · keeps 128 numbers a token (KV cache)" in text
        assert "cache at 17 tokens (float32): 17 KiB" in text and "layer 1 · full" in text
        assert (view.focused.layer_index, view.focused.head) == (1, 0)
        row = view.view.layers[1]   # the head under the cursor: its four scores, as `attnsim model` gives them
        assert f"layer 1 head 0: previous {row.scores['previous'][0]:.3f} · first {row.scores['first'][0]:.3f}" in text
        for _ in range(4):   # by number → previous → first → duplicate → induction
            await pilot.press("s")
        assert "sorted by induction: best L1 h3" in screen_text(app)
        assert [t.head for t in view.tiles[1]] == [3, 1, 2, 0]   # induction scores 0.35, 0.34, 0.33, 0.02
        assert (view.focused.layer_index, view.focused.head) == (1, 0)   # the same head, moved
        await pilot.press("s")   # back to the heads in order
        await pilot.press("up", "right", "right", "enter")
        await settle(pilot)
        main = app.screen
        assert main.trace.scenario.model["layer"] == 0 and main.head == 2 and main.step_id == "h2.weights"
        m = main.trace.scenario.model
        want = tracer.run(tracer.from_model(m["path"], m["text"], 0), main.session.preset)["h2.weights"]
        np.testing.assert_array_equal(main.trace["h2.weights"], want)


@pilot_test
async def test_a_taller_model_scrolls_at_80_by_24(checkpoint):
    """SmolLM3's 3 layers (the middle one slides over 3 tokens without positions) need more than 24
    lines: moving down to the last layer scrolls it into sight."""
    import tiny_checkpoints as tc
    folder, _ = checkpoint("smollm3")
    async with opened(tracer.from_model(folder, tc.TEXT, 0), size=(80, 24)) as (app, pilot):
        await pilot.press("M")
        await settle(pilot)
        view = app.screen
        rows = view.query_one("#model-rows")
        assert "layer 1 · sliding 3, no positions · 4/2 heads" in screen_text(app) and rows.scroll_y == 0
        last = view.tiles[2][0]
        assert last.region.bottom > rows.region.bottom        # the last layer's tiles are below the fold
        await pilot.press("down", "down")
        await settle(pilot)
        assert view.focused is last
        assert await until(pilot, lambda: rows.scroll_y > 0 and last.region.bottom <= rows.region.bottom)
        await pilot.press("escape")
        assert app.screen is not view and app.screen.trace.scenario.model["layer"] == 0


@pilot_test
async def test_a_hand_written_scenario_has_no_model():
    async with opened("by_hand", size=(80, 24)) as (app, pilot):
        await pilot.press("M")
        await settle(pilot)
        assert not isinstance(app.screen, ModelScreen)
        assert "there is no model" in status_text(app)


@pilot_test
async def test_the_help_and_the_footer_list_m():
    async with opened("by_hand", size=(200, 40)) as (app, pilot):
        assert "M model" in screen_text(app).splitlines()[-1]
        await pilot.press("question_mark")
        await settle(pilot)
        assert "model view: every layer and head" in screen_text(app)


@pilot_test
async def test_keys_typed_faster_than_the_focus_moves_each_move_on_from_the_last():
    """Left, Left, then the focus that the first Left asked for arrives (a frame late, as on a loaded
    machine in a real terminal), then Left: three tiles left, not two (the cursor once followed the
    late focus back: Enter opened head 2 where the teacher had moved to head 3)."""
    from textual.events import DescendantFocus
    async with opened("induction", size=(80, 24)) as (app, pilot):
        await pilot.press("M")
        await settle(pilot)
        view = app.screen
        view.at = (1, 3)
        view.action_move(-1)
        view.action_move(-1)
        view.on_descendant_focus(DescendantFocus(view.tiles[1][2]))   # the first Left's focus, late
        view.action_move(-1)
        assert view.at == (1, 0)
        view.on_descendant_focus(DescendantFocus(view.tiles[1][0]))   # the last one's
        assert view.at == (1, 0) and view.asked == []
        view.on_descendant_focus(DescendantFocus(view.tiles[1][3]))   # a click: the cursor follows
        assert view.at == (1, 3)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux for a real terminal")
def test_a_teacher_finds_the_induction_head_in_a_real_terminal():
    with terminal("model", "tui", "induction", size=(80, 24)) as term:
        term.wait_for("induction")
        # while the trace is computed (minutes on a loaded machine) M is answered in words; a key
        # that changed nothing in 20 s (once, in a full run of the suite) is pressed again, as a person would
        for _ in range(40):
            term.send("M")
            screen = term.shows(("esc back", "still being computed"), 20)   # the model view's key bar
            if screen is not None and "still being computed" not in screen:
                break
            time.sleep(3)
        term.wait_for("layer 1 · full")
        term.send("s", "s", "s", "s")
        term.wait_for("sorted by induction: best L1 h3")
        term.send("Left", "Left", "Left", "Enter")
        term.wait_for("h3.weights")
        term.send("C-q")


@pilot_test
async def test_a_scenario_of_a_few_heads_opens_the_model_head_it_keeps():
    """induction's layer 1 with heads [1, 3] only (numbered 0 and 1 there): the model view shows
    every head; Enter on head 3 opens the scenario's head 1, on head 0 says it is not kept."""
    from tracer.scenario.files import scenarios_dir
    text = "my cat saw a red bird near the old tree . my cat saw a red bird"
    scenario = tracer.from_model(scenarios_dir() / "induction", text, 1, heads=[1, 3])
    async with opened(scenario, size=(80, 24)) as (app, pilot):
        await pilot.press("M")
        await settle(pilot)
        view = app.screen
        assert [t.head for t in view.tiles[1]] == [0, 1, 2, 3]
        await pilot.press("enter")          # the cursor starts on layer 1's head 0: not kept
        assert "head 0 is not among this scenario's heads (1, 3)" in screen_text(app)
        await pilot.press("right", "right", "right", "enter")
        await settle(pilot)
        assert app.screen.head == 1 and app.screen.step_id == "h1.weights"


@pilot_test
async def test_the_model_view_opened_again_says_nothing_is_being_computed():
    """The view is kept once computed: opened again, its title shows the head under the cursor (the
    main screen's layer, as the first time), not the "computing layer 1 of 2…" that each layer's
    row says while the view is computed."""
    from tui.screens import model
    async with opened("induction", size=(80, 24)) as (app, pilot):
        model._views.clear()
        await pilot.press("M")
        await settle(pilot)
        assert await until(pilot, lambda: bool(model._views))   # computed in a worker of the model screen
        await settle(pilot)
        first = screen_text(app)
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("M")
        await settle(pilot)
        again = screen_text(app)
        assert "computing" not in first and "computing" not in again, again
        assert "layer 1 head 0:" in again, again


@pilot_test
async def test_the_overview_keys_pressed_while_the_trace_is_computed_say_so():
    """M (and m) before the trace is shown are answered on the status line, not dropped without a word."""
    async with opened("by_hand") as (app, pilot):
        app.screen.trace = None   # as while the first trace is being computed
        for key in ("M", "m"):
            await pilot.press(key)
            assert f"the trace is still being computed: press {key} again" in status_text(app)
            assert not isinstance(app.screen, ModelScreen)
