"""Every arithmetic value the command line accepts renders in every view: the status line's words
over the whole product of keys, and each value of each key through the screens with Pilot."""
from __future__ import annotations

import itertools

import pytest

import tracer
from tracer.arithmetic import parse_set, resolve
from tui.screens.main import MainScreen
from tui.session import Session, summary

from tui_helpers import go_to, opened, pilot_test, screen_text, settle, status_text

# One value of each kind a key takes (a word, a whole number, a fraction), as `--set` writes them.
VALUES = {
    "scale": ("sqrt", "floor", "none", "2", "0.5", "7"),
    "softmax_base": ("e", "2", "3.5", "1.5"),
    "normalize": ("softmax", "relu"),
    "stable": ("true", "false"),
    "dtype": ("float64", "float32"),
    "mask": ("none", "causal", "causal_lower_right", "sliding:2", "[[1,0,0,0],[1,1,0,0],[0,1,1,0],[1,1,1,1]]"),
    "layout": ("rows", "columns"),
}


def test_status_words_over_the_whole_space():
    """label() and summary() of every combination of every key's values, both presets."""
    scenario = tracer.load_scenario("by_hand")
    keys = list(VALUES)
    for preset in ("exact", "by-hand"):
        for combo in itertools.product(*(VALUES[k] for k in keys)):
            overrides = dict(zip(keys, combo))
            parse_set([f"{k}={v}" for k, v in overrides.items()])   # the CLI accepts it
            session = Session(scenario, preset, overrides)
            words = summary(session.arithmetic(), scenario.d_k) + session.label()
            assert "None" not in words and words.isprintable()


def test_defaults_in_a_file_over_the_whole_space(tmp_path):
    """A file's [defaults] take the same values (TOML strings, numbers, booleans)."""
    for key in ("scale", "softmax_base"):
        for value in VALUES[key]:
            toml = value if value[0].isdigit() else f'"{value}"'
            arithmetic = resolve("exact", tracer.tomlfile.parse_toml(f"{key} = {toml}"))
            assert "None" not in summary(arithmetic, 3)


async def _every_view(pilot) -> None:
    """Every step, then the diff, settings, worksheet, heads overview, help and export dialogs."""
    app = pilot.app
    screen = app.screen
    assert isinstance(screen, MainScreen), screen_text(app)
    await go_to(pilot, screen.trace.steps[0].id)   # a value set keeps the step shown: the last, after the first value
    for _ in range(len(screen.trace.steps)):
        await pilot.press("n")
    await pilot.press("f")
    for key in ("d", "s", "m", "question_mark", "e"):
        await pilot.press(key)
        await settle(pilot)
        assert "Traceback" not in screen_text(app)
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen), (key, screen_text(app))
    await pilot.press("w")
    await pilot.press("w")
    assert "None" not in status_text(app)


@pytest.mark.parametrize("key", list(VALUES))
@pilot_test
async def test_every_value_of_a_key_in_every_view(key):
    async with opened("by_hand", None, {}, size=(100, 30)) as (app, pilot):
        for value in VALUES[key]:
            app.screen.set_option(key, value)
            await settle(pilot)
            session = app.screen.session                # the preset's own value is not an override
            own = key not in session.overrides or session._named_own(key)
            assert (f"{key}=" in status_text(app)) != own, (key, value, status_text(app))
            assert "error" not in status_text(app), status_text(app)
            await _every_view(pilot)


@pilot_test
async def test_scale_none_from_a_files_defaults(tmp_path):
    path = tmp_path / "unscaled.toml"
    text = (tracer.scenario.files.scenarios_dir() / "by_hand.toml").read_text(encoding="utf-8")
    path.write_text(text + '\n[defaults]\nscale = "none"\n', encoding="utf-8")
    async with opened(str(path), None, {}) as (app, pilot):
        assert "unscaled" in status_text(app)
        await _every_view(pilot)
