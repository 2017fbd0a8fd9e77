"""Linear attention in the terminal UI (CONTRACT §16): delta_rule's stacked states drawn with their
token and key-channel rows, a cell's story telling the prediction, the error and the write with the
lesson's numbers as the cursor steps down the states, and the implicit weights with their negative
cell drawn on the diverging scale."""
import shutil

import pytest

from tui.widgets.cell_info import CellInfo
from tui.widgets.heat import scale_for
from tui.widgets.matrix import MatrixView

from tui_helpers import drawn, go_to, opened, pilot_test, settle, terminal


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


@pilot_test
async def test_the_heads_overview_shows_each_head_s_implicit_weights():
    from tui.screens.heads import HeadsScreen
    from tui.widgets.mini_heat import MiniHeat
    async with opened("linear_decay", size=(100, 30)) as (app, pilot):
        await pilot.press("m")
        await settle(pilot)
        assert isinstance(app.screen, HeadsScreen)
        assert "2 heads' implicit weights" in str(app.screen.query_one("#heads-title").render())
        assert all(str(tile.render()).strip() for tile in app.screen.query(MiniHeat))   # drawn, not blank
        await pilot.press("right", "enter")
        await settle(pilot)
        assert app.screen.head == 1 and app.screen.step_id.startswith("h1.")


def test_a_signed_tile_diverges():
    from tui.widgets.mini_heat import HIGH, NEGATIVE, _diverging
    assert _diverging(-1.0).triplet == NEGATIVE and _diverging(1.0).triplet == HIGH


@pilot_test
async def test_the_state_panel_shows_the_token_under_the_cursor_being_written():
    from tui.widgets.state import StatePanel
    async with opened("delta_rule", size=(140, 45)) as (app, pilot):
        await go_to(pilot, "h0.state")
        await pilot.press("down", "down")   # row 0 of x2's state
        await settle(pilot)
        panel = app.screen.query_one(StatePanel)
        text = str(panel.render())
        assert panel.display and "state of head 0 after x2" in text, text
        assert "prediction Sᵀk = (2, 0)   error v − Sᵀk = (−2, 2)" in text and "β = 1/2" in text
        assert "keeps: the state keeps 4 numbers whatever the length" in text
        lines = text.splitlines()[:-1]   # decayed [[2, 0], [0, 0]] + write [[−1, 1], [−1, 1]] = S₂ [[1, 1], [−1, 1]]
        assert [line.split() for line in lines[-2:]] == [["[2", "0]", "[−1", "1]", "[", "1", "1]"],
                                                       ["[0", "0]", "[−1", "1]", "[−1", "1]"]], lines
        await go_to(pilot, "x")
        assert not panel.display   # no state on the input


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux for a real terminal")
def test_stepping_through_delta_rule_in_a_real_terminal():
    with terminal("linear", "tui", "delta_rule", size=(140, 45)) as term:
        term.wait_for("step x")
        term.send(*["n"] * 6)   # x, h0.q, h0.k, h0.v, h0.decay, h0.beta, then h0.state
        term.wait_for("h0.state[0, 0]")
        term.send("Down", "Down")   # row 0 of the state after x2: its prediction, error and write
        screen = term.wait_for("h0.state[2, 0]").replace("▕ ", "")   # the story's lines, joined
        assert "state after x2" in screen and "(0, 2) − (2, 0) = (−2, 2)" in screen, screen
        term.send("C-q")


def test_the_state_panel_shows_the_corner_of_a_large_state():
    """Redrawn on every cursor move: of an 8 × 8 state it formats the first 6 rows, columns and
    entries (a real layer's is 128 × 128, about 50 000 numbers a move otherwise), and says so."""
    import numpy as np

    import tracer
    from tui.widgets.state import SHOWN, StatePanel
    rng = np.random.default_rng(4)
    w = [rng.normal(size=(8, 8))]
    trace = tracer.run(tracer.from_arrays(rng.normal(size=(5, 8)), w, w, w,
                                          linear=dict(rule="delta", decay=0.5, beta=1.0)))
    panel, shown = StatePanel(), []
    panel.update = shown.append
    panel.show_for(trace, trace.step("h0.state"), 2 * 8, 0)
    text = str(shown[-1])
    rows = [line for line in text.splitlines() if line.startswith("[")]
    assert len(rows) == SHOWN == 6 and all(line.count("…") == 3 for line in rows)
    assert "(8 × 8: the first 6 rows and columns)" in text and "k = (" in text
    k = text.split("k = (")[1].split(")")[0].split(", ")
    assert len(k) == SHOWN + 1 and k[-1] == "…"
