"""Issue 23, item 15: at 80 × 24 the diff view's A − B panel shows every row and column whole
(it hid row x1, then x4, behind a cut); it spans the width under A and B."""
import pytest

from tui.screens.diff import DiffScreen
from tui.widgets.matrix import MatrixView

from tui_helpers import drawn, go_to, opened, pilot_test, screen_text, settle


@pilot_test
async def test_a_minus_b_is_whole_at_80_by_24():
    async with opened(size=(80, 24)) as (app, pilot):
        await go_to(pilot, "h0.weights")
        await pilot.press("d")
        await settle(pilot)
        await pilot.pause(0.3)
        assert isinstance(app.screen, DiffScreen)
        delta = app.screen.query_one("#delta", MatrixView)
        lines = drawn(delta)
        assert [line[0] for line in lines[1:5]] == ["x1", "x2", "x3", "x4"], lines
        assert lines[0][-1].endswith("x4") and all(len(line) == 5 for line in lines[1:5]), lines
        assert "more" not in (delta.border_subtitle or "")


@pytest.mark.parametrize("name, flags", [("delta_rule", "h0.implicit"), ("flash", "no attention weights"),
                                         ("kv_cache", "no attention weights")])
@pilot_test
async def test_the_diff_of_a_trace_without_attention_weights_opens(name, flags):
    """A linear layer flags its implicit weights' most-attended keys; an online or decoding trace,
    which records no h{h}.weights, says so (the diff crashed the app on all three)."""
    async with opened(name, size=(80, 24)) as (app, pilot):
        last = app.screen.trace.steps[-1].id
        await go_to(pilot, last)
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, DiffScreen), screen_text(app)
        assert flags in str(app.screen.query_one("#flags").render())
        await pilot.press("n", "p", "escape")
        await settle(pilot)
        assert app.is_running and not isinstance(app.screen, DiffScreen)
