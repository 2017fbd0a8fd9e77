"""`M` on a hybrid checkpoint (CONTRACT §20, §16): a linear layer's row says what it keeps (its state,
fixed) over its heads' implicit weights, a softmax layer's its cache a token; Enter on a linear
layer's head opens that layer at that head's implicit weights."""
import pytest

import tracer
from tui.screens.model import ModelScreen

from tui_helpers import opened, pilot_test, screen_text, settle

pytest.importorskip("torch")
pytest.importorskip("transformers")


@pilot_test
async def test_a_hybrid_s_layers_keep_a_state_or_a_cache_and_open_at_a_head(tmp_path):
    import tiny_hybrid
    tiny_hybrid.build("qwen3_next", tmp_path)
    async with opened(tracer.from_model(tmp_path, "the cat sat on the mat", 1), size=(120, 40)) as (app, pilot):
        await pilot.press("M")
        await settle(pilot)
        view = app.screen
        assert isinstance(view, ModelScreen)
        text = screen_text(app)
        assert "layer 0 · linear (delta) · 4/2 heads · keeps a state of 192 numbers in all (state)" in text, text
        assert "layer 1 · global, rope 50 % · 4/2 heads · keeps 32 numbers a token (KV cache)" in text, text
        await pilot.press("up", "right", "enter")   # layer 0, head 1
        await settle(pilot)
        main = app.screen
        assert main.trace.scenario.model["layer"] == 0 and main.head == 1, (main.trace.scenario.model, main.head)
        assert main.step_id == "h1.implicit", main.step_id
