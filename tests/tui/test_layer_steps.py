"""Today's layer in the terminal UI: every step of each built-in that teaches it (and each of today's
mechanisms) can be stepped through, with the arithmetic and the layout swapped live, and non-square scores keep both axes'
tokens (the context's for keys). Head 0 and the shared steps are walked at 80 × 24 by
test_explanation_in_sight.py; here the other heads' steps, at 120 × 40."""
import pytest

from tui.widgets.matrix import MatrixView

from tui_helpers import go_to, opened, pilot_test, screen_text, settle

V2 = ["biases", "keys_as_values", "gqa", "mqa", "rope", "cross_attention", "sliding_window"]
MECHANISMS = ["qk_norm", "softcap", "alibi", "streaming", "rope_scaling", "rope_scaling_plain", "rope_scaling_linear",
              "rope_scaling_yarn", "sinks", "mla"]


@pytest.mark.parametrize("name", V2 + MECHANISMS)
@pilot_test
async def test_every_step_swaps_arithmetic_and_layout_live(name):
    async with opened(name, size=(120, 40)) as (app, pilot):
        ids = [s.id for s in app.screen.trace.steps]
        for sid in [s.id for s in app.screen.trace.steps if s.head not in (None, 0)]:
            await go_to(pilot, sid)
            assert sid in screen_text(app)
        for key in ("a", "t", "a"):
            await pilot.press(key)
            await settle(pilot)
            assert app.screen.trace is not None and app.screen.step_id in app.screen.trace
        assert app.screen.step_id == ids[-1] or app.screen.step_id in ids


@pilot_test
async def test_cross_attention_labels_queries_and_keys_with_their_own_tokens():
    async with opened("cross_attention", size=(120, 40)) as (app, pilot):
        await go_to(pilot, "h0.weights")
        text = screen_text(app)
        for token in ("the", "black", "cat", "le", "chat", "noir", "dort"):
            assert token in text
        view = app.screen.query_one("#current", MatrixView)
        assert app.screen.trace["h0.weights"].shape == (3, 4) and view is not None
