"""Linear attention in the terminal UI (CONTRACT §16): delta_rule's stacked states drawn with their
token and key-channel rows, a cell's story telling the prediction, the error and the write with the
lesson's numbers as the cursor steps down the states, and the implicit weights with their negative
cell drawn on the diverging scale."""
from tui.widgets.cell_info import CellInfo
from tui.widgets.heat import scale_for
from tui.widgets.matrix import MatrixView

from tui_helpers import drawn, go_to, opened, pilot_test, settle


def story(app) -> str:
    return " ".join(str(app.screen.query_one(CellInfo).render()).split())


@pilot_test
async def test_stepping_through_the_states_and_the_negative_weight():
    async with opened("delta_rule", size=(140, 40)) as (app, pilot):
        await go_to(pilot, "h0.state")
        rows = drawn(app.screen.query_one("#current", MatrixView))
        assert rows[3] == ["x2·0", "1", "1"] and rows[4] == ["x2·1", "−1", "1"]   # S after x2: [[1, 1], [−1, 1]]
        await pilot.press("down", "down", "right")   # row 0 of x2's state, column 1
        await settle(pilot)
        told = story(app)
        assert "error v − Sᵀk = (0, 2) − (2, 0) = (−2, 2)" in told and "1/2 × 1 × 2 = 1" in told, told
        await pilot.press("down", "down")            # row 0 of x3's state: α = 1/2 halved it first
        await settle(pilot)
        assert "Decayed: α·S[0, 1] = 1/2 × 1 = 1/2" in story(app), story(app)
        await go_to(pilot, "h0.implicit")
        rows = drawn(app.screen.query_one("#current", MatrixView))
        assert rows[2] == ["x2", "−1/2", "1/2", "0", "0"]
        scale = scale_for(app.screen.trace["h0.implicit"], True)
        assert scale.signed and scale.level(-0.5) < 0 < scale.level(0.5)   # diverging: the negative cell shows
