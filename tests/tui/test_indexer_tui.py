"""The lightning indexer in the terminal UI (built-in sparse_topk): its steps in the list, the keys it
dropped drawn dim with a `·` on a head's weights, and the cell panel saying why a key was dropped."""
from tui.widgets.cell_info import CellInfo
from tui.widgets.matrix import MatrixView
from tui.widgets.mini_heat import MiniHeat

from tui_helpers import go_to, opened, pilot_test, screen_text, settle, status_text


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
        assert "query sat kept 2 of 4 keys (top-2)" in status_text(app)
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


TWO_HEADS = """mask = "causal"
tokens = ["<s>", "the", "cat", "sat"]
x = [[0, 0, 1], [0, 0, 0], [0, 1, 0], [1, 0, 0]]
[sparse]
topk = 2
[weights]
q = [[[2], [0], [0]], [[0], [1], [0]]]
k = [[[0], [1], [0]], [[1], [0], [0]]]
v = [[[1, 0], [0, 1], [1, 1]], [[1, 0], [0, 1], [1, 1]]]
index_q = [[1], [1], [1]]
index_k = [[-1], [2], [1]]
index_w = [[1], [1], [1]]
"""


def test_the_heads_overview_draws_dropped_keys_as_the_background(tmp_path):
    path = tmp_path / "two_heads.toml"
    path.write_text(TWO_HEADS, encoding="utf-8")
    _overview(str(path))


@pilot_test
async def _overview(path: str):
    async with opened(path, size=(160, 50)) as (app, pilot):
        await pilot.press("m")
        await settle(pilot)
        tile = app.screen.query(MiniHeat)[0]
        for _ in range(100):   # drawn by a worker
            if "top-2" in str(tile.border_subtitle):
                break
            await pilot.pause(0.05)
        assert "top-2" in str(tile.border_subtitle)
        # rows <s>, the | cat, sat (sparse_topk's choice): cat and sat dropped the (column 1), sat itself
        # (column 3, the lower half of the second line)
        lines = tile.render().plain.splitlines()
        assert lines == ["▀▀▀▀", "▀ ▀▀"], lines


@pilot_test
async def test_enter_on_the_choice_opens_the_heads_weights_at_that_cell():
    async with opened("sparse_topk", size=(160, 50)) as (app, pilot):
        await go_to(pilot, "idx.selected")
        await pilot.press("down", "down", "down", "right")   # sat dropped the
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen.step_id == "h0.weights" and app.screen.cell == (3, 1)
        story = " ".join(str(app.screen.query_one(CellInfo).render()).split())
        assert "dropped by the indexer" in story, story


@pilot_test
async def test_topk_from_the_palette_and_a_bad_one_said_not_crashed():
    from textual.widgets import Input

    async def run(query: str) -> None:
        await pilot.press("ctrl+p")
        await pilot.pause()
        app.screen.query_one(Input).value = query
        await pilot.pause(0.3)
        await pilot.press("enter")
        await settle(pilot)

    async with opened("sparse_topk", size=(160, 50)) as (app, pilot):
        await go_to(pilot, "h0.weights")
        await run("topk=4")   # every key kept: dense attention, 1/12 for sat's <s>
        assert app.screen.trace.arithmetic.topk == 4 and app.screen.trace["h0.weights"][3, 0] == 1 / 12
        await run("topk=0")
        assert "topk" in status_text(app) and "Traceback" not in screen_text(app)
        assert app.screen.trace.arithmetic.topk == 4   # the last good trace stays
    async with opened("by_hand", size=(160, 50)) as (app, pilot):
        await run("topk=2")
        assert "no [sparse] section" in status_text(app) and app.screen.trace.arithmetic.topk is None
