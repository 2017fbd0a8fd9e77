"""DeepSeek V4 traced in the terminal UI (CONTRACT §18): a compressed sparse layer of the tiny
checkpoint opens, its steps are listed, and the cell panel tells the new steps with their numbers
(an entry's pooled tokens, a key hidden because its entry is not complete, the output turned back);
the heads overview draws every head over the tokens then the entries."""
import pytest

import tracer
from tui.screens.heads import HeadsScreen
from tui.widgets.cell_info import CellInfo
from tui.widgets.matrix import MatrixView

from tui_helpers import go_to, opened, pilot_test, screen_text, settle, status_text

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import tiny_sparse as ts  # noqa: E402

TEXT = "the cat sat on the mat and the dog sat on the log"


@pytest.fixture(scope="module")
def layer1(tmp_path_factory):
    folder = tmp_path_factory.mktemp("deepseek_v4")
    ts.build("deepseek_v4", folder, seed=3)
    return tracer.from_model(str(folder), TEXT, 1)


def story(app) -> str:
    return " ".join(str(app.screen.query_one(CellInfo).render()).split())


@pilot_test
async def test_the_entries_the_indexer_dropped_are_dim(layer1):
    """Query 13 sees the 3 complete entries and keeps 2 (top-2): the third is drawn dim, the others not."""
    trace = tracer.run(layer1)
    n, chosen = 14, trace["idx.selected"][13]
    async with opened(layer1, size=(160, 50)) as (app, pilot):
        await go_to(pilot, "h0.weights")
        await pilot.press(*["down"] * 13)
        await settle(pilot)
        current = app.screen.query_one("#current", MatrixView)
        dim = {c for r in range(n) for c in range(n + 3) if current.is_dimmed(r, c)}
        assert {c for c in range(n + 3) if current.is_dimmed(13, c)} == {n + e for e in range(3) if not chosen[e]}
        assert chosen.sum() == 2 and all(c >= n for c in dim)
        assert "query ␣log kept 2 of 3 entries (top-2)" in status_text(app), status_text(app)


@pilot_test
async def test_the_new_steps_are_listed_and_explained(layer1):
    async with opened(layer1, size=(160, 50)) as (app, pilot):
        listed = screen_text(app)
        assert all(sid in listed for sid in ("hc.pre", "pool.weights", "pool.sum", "pool.k", "idx.selected")), listed
        await go_to(pilot, "pool.sum")
        assert "= Σ_s W·C = " in story(app) and "entry 0 pools tokens" in story(app), story(app)
        await go_to(pilot, "h0.masked")
        await pilot.press(*["down"] * 5, *["right"] * 16)   # query 5, key e2 (its window ends at token 11)
        await settle(pilot)
        assert app.screen.cell == (5, 16)
        assert "has seen only up to token" in story(app) and "not complete" in story(app), story(app)
        await go_to(pilot, "h0.z")   # the same query, its last feature: turned back at position 5
        assert app.screen.cell == (5, 15)
        assert "·cos(−" in story(app) and "position 5" in story(app), story(app)
        await pilot.press("m")   # the heads overview, then the next layer (built from the checkpoint)
        await settle(pilot)
        heads = app.screen
        assert isinstance(heads, HeadsScreen) and "layer 1 of 3" in str(heads.query_one("#heads-title").render())
        await pilot.press("full_stop")
        await settle(pilot)
        assert "layer 2 of 3: heavily_compressed_attention" in str(heads.query_one("#heads-title").render())


@pilot_test
async def test_enter_on_the_indexer_s_choice_opens_the_weights_of_that_entry(layer1):
    """idx.selected is query × entry; the weights are query × (tokens, then entries): Enter on
    (query 13, entry 1) lands on key column n + 1, that entry's weight."""
    n = 14
    async with opened(layer1, size=(160, 50)) as (app, pilot):
        await go_to(pilot, "idx.selected")
        await pilot.press(*["down"] * 13, "right", "enter")
        await settle(pilot)
        assert app.screen.step_id == "h0.weights" and app.screen.cell == (13, n + 1), app.screen.cell
