"""The heads overview of a real model's layer switches between the model's layers (each built when
first shown), and Enter on a head of another layer opens that layer on that head."""
import numpy as np
import pytest

import tracer
from tui.screens.heads import HeadsScreen

from tui_helpers import opened, pilot_test, settle

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")


@pilot_test
async def test_comma_and_full_stop_switch_layers_and_enter_opens_the_head():
    async with opened("induction", size=(120, 36)) as (app, pilot):   # layer 1 of the shipped 2-layer model
        assert app.screen.trace.scenario.model["layer"] == 1
        await pilot.press("m")
        await settle(pilot)
        heads = app.screen
        assert isinstance(heads, HeadsScreen) and "layer 1 of 2" in str(heads.query_one("#heads-title").render())
        await pilot.press("full_stop")
        await settle(pilot)
        assert "layer 0 of 2" in str(heads.query_one("#heads-title").render())
        await pilot.press("right", "right", "enter")
        await settle(pilot)
        main = app.screen
        assert main.trace.scenario.model["layer"] == 0 and main.head == 2 and main.step_id == "h2.weights"
        # independent check: the layer opened is layer 0 of the same checkpoint on the same text
        m = main.trace.scenario.model
        expected = tracer.run(tracer.from_model(m["path"], m["text"], 0), main.session.preset)["h2.weights"]
        np.testing.assert_array_equal(main.trace["h2.weights"], expected)


@pilot_test
async def test_the_top_bar_and_the_overview_name_each_layers_kind(checkpoint):
    """SmolLM3's layer 1 has no rotary positions and slides over 3 tokens (tiny_checkpoints): the
    top bar says so, and the overview names the kind of each layer it switches to."""
    import tiny_checkpoints as tc
    from tui_helpers import status_text
    folder, _ = checkpoint("smollm3")
    scenario = tracer.from_model(folder, tc.TEXT, 1)
    assert scenario.model["kind"] == "sliding 3, NoPE" and scenario.model["kinds"][0] == "global, rope"
    async with opened(scenario, size=(140, 36)) as (app, pilot):
        assert "(sliding 3, NoPE)" in status_text(app)
        await pilot.press("m")
        await settle(pilot)
        title = lambda: str(app.screen.query_one("#heads-title").render())  # noqa: E731
        assert "layer 1 of 3: sliding 3, NoPE" in title()
        await pilot.press("full_stop")
        await settle(pilot)
        assert "layer 2 of 3: global, rope" in title()


@pytest.mark.parametrize("family,layer", [("gemma2", 0), ("olmo2", 1), ("bloom", 2), ("yarn", 1), ("falcon_new", 2)])
@pilot_test
async def test_a_checkpoint_layer_of_each_mechanism_steps_through_and_explains(checkpoint, family, layer):
    """Every step of the layer (its mechanism's steps among them) shown and explained, and the
    arithmetic swapped live, without an error."""
    import tiny_checkpoints as tc
    from tui.widgets.step_info import StepInfo
    from tui_helpers import go_to, status_text
    folder, _ = checkpoint(family)
    async with opened(tracer.from_model(folder, tc.TEXT, layer), size=(140, 40)) as (app, pilot):
        ids = [s.id for s in app.screen.trace.steps]
        mechanism = {"gemma2": "h0.capped", "olmo2": "h0.q_norm", "bloom": "h0.biased", "yarn": "freqs",
                     "falcon_new": "kv1.k_rot"}[family]
        assert mechanism in ids
        for sid in ids:
            await go_to(pilot, sid)
            assert "error" not in status_text(app), (sid, status_text(app))
            assert str(app.screen.query_one(StepInfo).render()).strip()
        await pilot.press("a")
        await settle(pilot)
        assert app.screen.trace is not None and "error" not in status_text(app)


@pilot_test
async def test_a_deepseek_layer_steps_through_its_latent_and_absorbed_form(tmp_path):
    """DeepSeek-V3's layout (compressed queries, yarn): the latent, the rotary key and the absorbed
    scores are on screen and explained, and the arithmetic swaps live."""
    pytest.importorskip("transformers")
    import tiny_checkpoints as tc
    from test_deepseek import VARIANTS, _build
    from tui.widgets.cell_info import CellInfo
    from tui_helpers import go_to
    _build(*VARIANTS["v3"], tmp_path, seed=2)
    async with opened(tracer.from_model(tmp_path, tc.TEXT, 2), size=(140, 40)) as (app, pilot):
        for sid, words in (("c_q", "root mean square"), ("c_kv", "numbers to the cache"), ("k_pe", "shared by every head"),
                           ("h3.q_pe", "position"), ("h3.absorbed", "the same score, read straight from the cache")):
            await go_to(pilot, sid)
            story = " ".join(str(app.screen.query_one(CellInfo).render()).split())
            assert words in story, (sid, story)
        await pilot.press("a")
        await settle(pilot)
        assert app.screen.step_id == "h3.absorbed" and app.screen.trace.arithmetic.preset == "by-hand"
