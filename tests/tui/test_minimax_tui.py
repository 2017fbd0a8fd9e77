"""A MiniMax lightning layer in the terminal UI (CONTRACT §16): the steps list shows the SiLU'd q, k, v
beside the state, and a state cell's story tells the decay α = exp(−slope) and the write k·vᵀ with
the trace's own numbers (tests/tiny_minimax.py's checkpoint)."""
import numpy as np
import pytest

import tracer
from tui.widgets.cell_info import CellInfo
from tui.widgets.steps import StepList

from tui_helpers import go_to, opened, pilot_test, settle

pytest.importorskip("torch")
pytest.importorskip("transformers")


@pilot_test
async def test_a_lightning_layer_lists_its_steps_and_explains_a_state_cell(tmp_path):
    import tiny_minimax
    tiny_minimax.build(tmp_path)
    async with opened(tracer.from_model(tmp_path, "the cat sat on the mat", 2), size=(140, 45)) as (app, pilot):
        listed = str(app.screen.query_one(StepList).render())
        for step in ("h0.q_act", "h0.k_act", "h0.v_act", "h0.decay", "h0.state", "h0.implicit", "h0.z"):
            assert step in listed, listed
        await go_to(pilot, "h1.state")
        await pilot.press("down", "down", "down", "down", "down", "down", "down", "down", "down", "right")
        await settle(pilot)
        told = " ".join(str(app.screen.query_one(CellInfo).render()).split())
        trace = app.screen.trace
        d = trace.scenario.d_k
        alpha = float(trace["h1.decay"][1, 0])    # token 1's state: row 9 = token 1, key channel 1
        previous, k, v = trace["h1.state"][1, 1], trace["h1.k_act"][1, 1], trace["h1.v_act"][1, 1]
        assert np.isclose(trace["h1.state"][d + 1, 1], alpha * previous + k * v, rtol=1e-12)
        assert np.isclose(alpha, np.exp(-(2.0 ** -4) * (1 - 2 / (3 + 1e-5) + 1e-5)), rtol=1e-12)   # head 1, layer 2 of 4
        assert "Decayed: α·S[1, 1] = " in told and f"{alpha:.4f}" in told and "The write k[1]·v[1]" in told, told
