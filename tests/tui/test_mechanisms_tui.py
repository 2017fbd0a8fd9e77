"""The mechanisms of today's checkpoints in the terminal UI: each mechanism's step explained with its
numbers (stepping through every step of their built-ins, with the arithmetic and the layout swapped
live: test_layer_steps.py)."""
import pytest

from tui.widgets.cell_info import CellInfo

from tui_helpers import go_to, opened, pilot_test, screen_text, settle

@pytest.mark.parametrize("name,sid,words", [("qk_norm", "h0.q_norm", "÷ √("), ("softcap", "h0.capped", "5·tanh("),
                                            ("alibi", "h1.biased", "slope 1"), ("streaming", "h0.masked", "query on"),
                                            ("rope_scaling", "freqs", "turns in the original 64 positions"),
                                            ("mla", "c_kv", "2 + 2 = 4 numbers to the cache"),
                                            ("mla", "h0.absorbed", "the same score, read straight from the cache"),
                                            ("mla", "h1.k_nope", "rebuilt from the cached latent")])
@pilot_test
async def test_the_mechanism_step_is_explained_with_its_numbers(name, sid, words):
    async with opened(name, size=(120, 40)) as (app, pilot):
        await go_to(pilot, sid)
        for key in ("down", "down", "down", "down", "left", "left"):   # row 1 … 4, column 0 (or the nearest)
            await pilot.press(key)
        await settle(pilot)
        row, col = app.screen.cell
        story = str(app.screen.query_one(CellInfo).render())
        assert " ".join(app.screen.trace.explain(sid, row, col).split())[:50] in " ".join(story.split()), story
        assert words in " ".join(story.split()), (row, col, story)


@pilot_test
async def test_a_quiz_on_the_distance_penalty_and_the_normed_queries():
    from tui_helpers import status_text
    async with opened("alibi", None, None, ["h1.biased"], size=(120, 36)) as (app, pilot):
        assert (app.screen.step_id, app.screen.cell) == ("h1.biased", (0, 0))
        await pilot.press("down", "down", "down", "down")       # query la#4, key la#0: 2 − 1·4
        await settle(pilot)
        await pilot.press(*"-1", "enter")
        await settle(pilot)
        assert "✗" in status_text(app) and "slope" in status_text(app)   # the hint names the penalty
        await pilot.press(*"-2", "enter")
        await settle(pilot)
        assert "✓" in status_text(app)
    async with opened("qk_norm", None, None, ["h0.q_norm"], size=(120, 36)) as (app, pilot):
        await pilot.press("down", "down")                       # dog, feature 0: 1 ÷ √9 × 2
        await settle(pilot)
        await pilot.press(*"2/3", "enter")
        await settle(pilot)
        assert "✓" in status_text(app)


@pilot_test
async def test_decoding_from_a_latent_cache_says_how_big_it_is(tmp_path):
    """[decode] with [mla]: stepping onto a decoded token's latent cache shows its size in numbers."""
    from tracer.scenario import scenarios_dir
    path = tmp_path / "decode_mla.toml"
    path.write_text((scenarios_dir() / "mla.toml").read_text(encoding="utf-8") + "\n[decode]\nprompt = 2\n",
                    encoding="utf-8")
    async with opened(str(path), size=(120, 40)) as (app, pilot):
        await go_to(pilot, "t3.ckv_cache")
        text = " ".join(screen_text(app).split())
        assert "the cache holds 4 rows of 2 + 2 = 16 numbers" in text and "keys and values: 32" in text, text
        await go_to(pilot, "t3.h1.scores")
        assert "absorbed" in " ".join(screen_text(app).split())
