"""What a new user's hour found in the TUI: pictures that overwrite each other, a worksheet that
does not scroll, an open dialog deaf to typing, a stale error, words cut mid-word, the quiz's
counts and lost keys, overrides that are the preset's own. Each test failed before its fix."""
from tui.screens.picker import PickerScreen
from tui.screens.settings import SettingsScreen
from tui.widgets.worksheet import Worksheet

from tui_helpers import go_to, opened, pilot_test, screen_text, settle, status_text


def test_clip_cuts_at_a_word_end():
    from tui.widgets.fit import clip
    assert clip("scenario gqa │ step h2.weights", 22) == "scenario gqa │ step…"
    assert clip("short", 10) == "short"


@pilot_test
async def test_no_word_is_cut_at_80_by_24():
    async with opened("gqa", size=(80, 24)) as (app, pilot):
        await pilot.press("right_square_bracket", "right_square_bracket")
        await go_to(pilot, "h2.weights")
        lines = screen_text(app).splitlines()
        top, keys = lines[0].rstrip(), lines[-1].rstrip()
        assert top.endswith(")") or top.endswith("…"), top
        words = ["help", "next", "prev", "arithmetic", "head", "diff", "fractions", "settings", "layout",
                 "open", "export", "worksheet", "palette"]
        assert all(w in words for w in keys.replace("▏", " ").split() if len(w) > 2), keys


@pilot_test
async def test_g_names_the_picture_by_its_arithmetic(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    async with opened("by_hand", size=(100, 30)) as (app, pilot):
        await go_to(pilot, "h0.weights")
        await pilot.press("g")
        await settle(pilot)
        await pilot.press("a")
        await settle(pilot)
        await pilot.press("g")
        await settle(pilot)
        names = sorted(p.name for p in tmp_path.iterdir())
        assert names == ["by_hand-h0.weights-by-hand.svg", "by_hand-h0.weights-exact.svg"], names
        assert "✓ saved heatmap" in status_text(app)


@pilot_test
async def test_a_success_replaces_an_old_error_and_stays_until_a_key(tmp_path):
    async with opened("by_hand", size=(100, 30)) as (app, pilot):
        app.screen.query_one("#status").say("no such extra", "error")
        await pilot.press("e")
        await settle(pilot)
        app.screen.query_one("#path").value = str(tmp_path / "t.json")
        await pilot.press("enter")
        await settle(pilot)
        await pilot.pause(0.3)
        status = status_text(app)
        assert "error" not in status and "✓ wrote" in status and "t.json" in status, status
        await pilot.press("n")
        await settle(pilot)
        assert "wrote" not in status_text(app)


@pilot_test
async def test_the_open_dialog_opens_what_was_typed():
    async with opened("by_hand", size=(100, 30)) as (app, pilot):
        await pilot.press("o")
        await settle(pilot)
        assert isinstance(app.screen, PickerScreen)
        await pilot.press(*"multi_head", "enter")
        await settle(pilot)
        assert app.screen.trace.scenario.name == "multi_head"
        await pilot.press("o")
        await settle(pilot)
        await pilot.press(*"gqa", "enter")        # a part of a name: the one it matches
        await settle(pilot)
        assert app.screen.trace.scenario.name == "gqa"


@pilot_test
async def test_the_worksheet_follows_the_cursor_at_80_by_24():
    async with opened("by_hand", size=(80, 24)) as (app, pilot):
        await pilot.press("w")
        await settle(pilot)
        sheet = app.screen.query_one(Worksheet)
        await go_to(pilot, "h0.weights")
        await pilot.pause(0.2)
        view = sheet.views["h0.weights"]
        assert sheet.scroll_y > 0
        assert sheet.region.contains_region(view.region.intersection(sheet.region)) and view.region.y >= sheet.region.y
        assert "h0.weights" in screen_text(app) and "9/46" in screen_text(app)
        await pilot.press("tab")                    # the next matrix: h0.z, in sight
        await settle(pilot)
        await pilot.pause(0.2)
        assert app.screen.step_id == "h0.z" and "h0.z" in screen_text(app)


@pilot_test
async def test_the_worksheet_is_whole_at_140_by_45():
    async with opened("by_hand", size=(140, 45)) as (app, pilot):
        await pilot.press("w")
        await settle(pilot)
        await pilot.pause(0.2)
        sheet = app.screen.query_one(Worksheet)
        assert sheet.max_scroll_y == 0 and all(v.region.bottom <= sheet.region.bottom for v in sheet.views.values())


@pilot_test
async def test_the_quiz_counts_revealed_cells_apart_and_says_one_step():
    async with opened("by_hand", None, None, ["h0.sums"], size=(120, 36)) as (app, pilot):
        assert "1 step to fill" in status_text(app)
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert "0 of 4 cells right, 1 revealed" in status_text(app)


@pilot_test
async def test_a_burst_after_esc_reaches_the_answer_whole():
    async with opened("by_hand", None, None, ["h0.weights"], size=(120, 36)) as (app, pilot):
        screen = app.screen
        from textual import events
        await pilot.press("escape")
        for key, char in [("minus", "-"), ("i", "i"), ("n", "n"), ("f", "f"), ("enter", "\r")]:
            app.post_message(events.Key(key, char))   # a paste: no pause between the keys
        await pilot.pause(0.3)
        await settle(pilot)
        status = status_text(app)
        assert screen.step_id == "h0.weights" and "“-” is not a number" not in status
        assert "-inf is not it" in status, status


@pilot_test
async def test_t_t_leaves_no_override_and_the_preset_own_is_none():
    async with opened("by_hand", size=(100, 30)) as (app, pilot):
        await pilot.press("t")
        await settle(pilot)
        assert "layout=" in status_text(app)
        await pilot.press("t")
        await settle(pilot)
        assert "layout=" not in status_text(app)
        await pilot.press("a")
        await settle(pilot)
        app.screen.set_option("scale", "sqrt")     # exact's own scale
        await settle(pilot)
        assert "scale=sqrt" not in status_text(app)


def test_the_palette_lists_a_typed_setting_once():
    from types import SimpleNamespace

    from tui.commands import commands
    from tui.session import Session
    screen = SimpleNamespace(post_message=print, run_action=print, session=Session.open("by_hand"), trace=None)
    screen.trace = screen.session.run()
    texts = [text for text, _, _ in commands(screen, "set scale=sqrt")]
    assert texts.count("set scale=sqrt") == 1


@pilot_test
async def test_settings_keep_the_contract_order():
    async with opened("by_hand", size=(100, 40)) as (app, pilot):
        await pilot.press("s")
        await settle(pilot)
        assert isinstance(app.screen, SettingsScreen)
        ids = [w.id for w in app.screen.query("#fields Input, #fields Select")]
        assert ids == ["preset", "scale", "softmax_base", "normalize", "stable", "dtype", "mask", "algorithm",
                       "block", "layout"]
