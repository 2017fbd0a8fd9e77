"""The dense families of 2026 in the terminal UI (CONTRACT §17): the chunked mask, the values' norm
with scale 1, the query temperature and shared keys and values explained with their numbers; the
titles and the cache note of a shared key; a quiz on the chunked weights."""
import pytest

from tui.widgets.cell_info import CellInfo

from tiny_dense2026 import tiny  # noqa: F401  (the fixture)
from tui_helpers import go_to, opened, pilot_test, screen_text, settle, status_text

NOPE = """
tokens = ["a", "b", "c", "d", "e"]
mask = "causal"
x = [[1, 0], [0, 1], [1, 1], [1, 0], [0, 1]]
[rope]
dims = 0
temperature = { scale = 0.5, floor = 2 }
[weights]
q = [[1, 0], [0, 1]]
k = [[1, 0], [0, 1]]
v = [[1, 0], [0, 1]]
"""

LATENT = """
tokens = ["the", "cat", "sat", "down"]
mask = "causal"
x = [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]
[mla]
down = [[1, 0], [0, 1], [1, 1]]
rope_k = [[1, 0], [1, 0], [1, 0]]
up_k = [[[2, 0], [0, 0]]]
up_v = [[[1, 0], [0, 1]]]
q = [[[0, 0], [1, 0], [0, 0]]]
rope_q = [[[0, 0], [1, 0], [0, 0]]]
[rope]
style = "interleaved"
temperature = { scale = 0.5, floor = 2, shift = 0 }
"""
WRITTEN = {"nope": NOPE, "latent": LATENT}   # scenarios written here (Mistral 4's: latent, its queries warmed)


def scenario(tmp_path, name: str) -> str:
    if name not in WRITTEN:
        return name
    (tmp_path / f"{name}.toml").write_text(WRITTEN[name], encoding="utf-8")
    return str(tmp_path / f"{name}.toml")


@pytest.mark.parametrize("name, sid, moves, words", [
    ("chunked", "h0.masked", ("down",) * 5 + ("right",), "is in chunk ⌊1/4⌋ = 0, earlier but not in the chunk ⌊5/4⌋ = 1"),
    ("no_scale", "h0.v_norm", ("down",), "4 ÷ √(16) = 1"),
    ("kv_sharing", "kv0.k", ("down",), "kv0.k["),
    ("nope", "tau", ("down",) * 3, "= 1 + 0.5·ln(1 + ⌊(3 + 1)/2⌋) = 1 + 0.5·ln 3"),
    ("nope", "h0.q_temp", ("down",) * 3, "× τ(3)"),
    ("latent", "h0.q_temp", ("down",) * 2 + ("right",) * 3, "(h0.q_pe[sat, 1] times its position's τ"),
    ("latent", "h0.scores", ("down",) * 2 + ("right",), "q_temp's first 2 numbers, then its last 2"),
])
@pilot_test
async def test_each_step_is_explained_with_its_numbers(tmp_path, name, sid, moves, words):
    async with opened(scenario(tmp_path, name), size=(120, 40)) as (app, pilot):
        await go_to(pilot, sid)
        await pilot.press(*moves)
        await settle(pilot)
        row, col = app.screen.cell
        story = " ".join(str(app.screen.query_one(CellInfo).render()).split())
        assert " ".join(app.screen.trace.explain(sid, row, col).split())[:50] in story, story
        assert words in story, (row, col, story)


@pilot_test
async def test_a_shared_key_names_its_layer_and_counts_the_cache_once():
    async with opened("kv_sharing", size=(140, 44)) as (app, pilot):
        await go_to(pilot, "kv0.v")
        text = " ".join(screen_text(app).replace("▕", " ").split())   # the notes' lines, joined
        assert "Values of layer A, shared" in text
        assert "the two layers keep 16 numbers, against 32" in text, text


@pilot_test
async def test_a_quiz_on_the_chunked_weights():
    async with opened("chunked", None, None, ["h0.weights"], size=(120, 36)) as (app, pilot):
        await pilot.press(*("down",) * 5, *("right",) * 4)     # query "it", key "then": 1/4
        await settle(pilot)
        assert app.screen.cell == (5, 4)
        await pilot.press(*"1/2", "enter")                     # the causal mask's share of "cat", here
        await settle(pilot)
        assert "✗" in status_text(app)
        await pilot.press(*"1/4", "enter")
        await settle(pilot)
        assert "✓" in status_text(app)


@pilot_test
async def test_the_heads_overview_of_a_tiny_gemma4_opens_its_shared_layer(tiny):
    """Layer 4 of the tiny Gemma 4 (tests/tiny_dense2026.py) reads layer 1's keys and values: the
    overview names it, and opening a head there shows the source's keys, computed from kv_x."""
    import numpy as np

    import tiny_dense2026 as td
    import tracer
    from tui.screens.heads import HeadsScreen
    folder, data, ids, ref = tiny("gemma4_text")
    async with opened(tracer.from_model(folder, td.TEXT, 2), size=(140, 40)) as (app, pilot):
        await pilot.press("m")
        await settle(pilot)
        heads = app.screen
        title = lambda: str(heads.query_one("#heads-title").render())  # noqa: E731
        assert isinstance(heads, HeadsScreen) and "layer 2 of 5: sliding 3" in title()
        await pilot.press("full_stop", "full_stop")
        await settle(pilot)
        assert "layer 4 of 5: global, KV shared from layer 1" in title(), title()
        await pilot.press("right", "enter")
        await settle(pilot)
        main = app.screen
        assert main.trace.scenario.model["layer"] == 4 and main.head == 1
        assert main.trace.step("kv0.k").title.startswith("Keys of layer 1, shared")
        np.testing.assert_allclose(np.stack([main.trace.rows(f"h{h}.weights") for h in range(4)]), ref[4]["weights"],
                                   atol=1e-4)


@pytest.mark.parametrize("name, sid, shown", [("chunked", "h0.weights", ["h0.masked"]),
                                              ("no_scale", "h0.z", ["h0.q_norm", "h0.v_norm"]),
                                              ("kv_sharing", "h1.z", ["kv0.k", "kv0.v", "h1.q"]),
                                              ("nope", "h0.z", ["tau", "h0.q_temp"]),
                                              ("latent", "h0.z", ["tau", "h0.q_temp", "h0.scores", "h0.absorbed"])])
@pilot_test
async def test_the_worksheet_lays_out_the_new_steps(tmp_path, name, sid, shown):
    from tui.widgets.worksheet import Worksheet
    async with opened(scenario(tmp_path, name), size=(160, 50)) as (app, pilot):
        await go_to(pilot, sid)
        await pilot.press("w")
        await settle(pilot)
        views = app.screen.query_one(Worksheet).views
        assert all(step in views for step in shown), sorted(views)


@pilot_test
async def test_the_model_view_of_a_tiny_gemma4_names_the_shared_layers(tiny):
    import tiny_dense2026 as td
    import tracer
    from tui.screens.model import ModelScreen
    folder, data, ids, ref = tiny("gemma4_text")
    async with opened(tracer.from_model(folder, td.TEXT, 4), size=(120, 60)) as (app, pilot):
        await pilot.press("M")
        await settle(pilot)
        assert isinstance(app.screen, ModelScreen)
        text = screen_text(app)
        assert "layer 1 · global, K = V" in text and "KV shared from layer 2" in text, text
        assert "keeps 0 numbers a token" in text


@pilot_test
async def test_the_heads_overview_of_a_tiny_mistral4_opens_its_warmed_layers(tiny):
    """Mistral 4's layers in the heads overview: named latent with τ, each opened at a head, its queries warmed."""
    import numpy as np

    import tiny_dense2026 as td
    import tracer
    from tui.screens.heads import HeadsScreen
    folder, data, ids, ref = tiny("mistral4")
    async with opened(tracer.from_model(folder, td.TEXT, 1), size=(140, 40)) as (app, pilot):
        await pilot.press("m")
        await settle(pilot)
        heads = app.screen
        title = lambda: str(heads.query_one("#heads-title").render())  # noqa: E731
        assert isinstance(heads, HeadsScreen) and "layer 1 of 2: latent, rope yarn ×4, τ" in title(), title()
        await pilot.press("comma")
        await settle(pilot)
        assert "layer 0 of 2: latent, rope yarn ×4, τ" in title(), title()
        await pilot.press("right", "enter")
        await settle(pilot)
        main = app.screen
        assert main.trace.scenario.model["layer"] == 0 and main.head == 1
        assert "h1.q_temp" in [s.id for s in main.trace.steps]
        np.testing.assert_allclose(np.stack([main.trace.rows(f"h{h}.weights") for h in range(4)]), ref[0]["weights"],
                                   atol=1e-4)
