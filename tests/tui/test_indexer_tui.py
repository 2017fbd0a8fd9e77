"""The lightning indexer in the terminal UI (built-in sparse_topk): its steps in the list, the keys it
dropped drawn dim with a `·` on a head's weights, and the cell panel saying why a key was dropped."""
from tui.widgets.cell_info import CellInfo
from tui.widgets.matrix import MatrixView

from tui_helpers import go_to, opened, pilot_test, screen_text, settle


@pilot_test
async def test_dropped_keys_are_dim_and_the_panel_says_why():
    async with opened("sparse_topk", size=(160, 50)) as (app, pilot):
        await go_to(pilot, "h0.weights")
        current = app.screen.query_one("#current", MatrixView)
        # sat (row 3) dropped the (1) and itself (3); cat (row 2) dropped the (1); nothing else is dim
        assert {(r, c) for r in range(4) for c in range(4) if current.is_dimmed(r, c)} == {(2, 1), (3, 1), (3, 3)}
        assert current.cell_text(3, 1) == "0·" and current.cell_text(3, 2) == "9/10"
        await pilot.press("down", "down", "down", "right")   # query sat, key the
        await settle(pilot)
        assert app.screen.cell == (3, 1)
        story = " ".join(str(app.screen.query_one(CellInfo).render()).split())
        assert "dropped by the indexer: dense attention would give 1/12" in story, story
        await go_to(pilot, "h0.masked")
        story = " ".join(str(app.screen.query_one(CellInfo).render()).split())
        assert "the indexer dropped key the for query sat: index score 0 ranks 3 of 4" in story, story


@pilot_test
async def test_the_indexers_steps_are_listed_and_explained():
    async with opened("sparse_topk", size=(160, 50)) as (app, pilot):
        await go_to(pilot, "idx.selected")
        assert app.screen.query_one("#current", MatrixView).dimmed is None
        await pilot.press("down", "down", "down", "right")
        await settle(pilot)
        story = " ".join(str(app.screen.query_one(CellInfo).render()).split())
        assert "dropped: index score 0 ranks 3 of 4, below the 2nd best, 1" in story, story
        listed = screen_text(app)
        assert all(sid in listed for sid in ("idx.q", "idx.k", "idx.w", "idx.scores", "idx.selected")), listed
