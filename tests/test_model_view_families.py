"""The model view of each family's tiny checkpoint: one streamed pass gives, layer by layer, the same
weights as tracing that layer alone (tracer.from_model, which runs the blocks before it again), and
each layer's kind and memory as its config says."""
from __future__ import annotations

import json

import numpy as np
import pytest

import tracer

pytest.importorskip("transformers")
tc = pytest.importorskip("tiny_checkpoints")

# family → each layer's kind, from its switches in tiny_checkpoints.MORE
KINDS = {
    "qwen3": ["full", "sliding 3", "sliding 3"],                   # max_window_layers = 1
    "gemma3_text": ["sliding 3", "full", "sliding 3"],             # layer_types
    "smollm3": ["full", "sliding 3, no positions", "full"],   # no_rope_layers [1, 0, 1]: the NoPE layer slides
    "olmo2": ["full"] * 3,
    "phi3_partial": ["full"] * 3,
    "bloom": ["full"] * 3,
    "falcon": ["full"] * 3,
    "falcon_new": ["full"] * 3,
}


@pytest.mark.parametrize("family", sorted(KINDS))
def test_one_pass_gives_each_layers_traced_weights(checkpoint, family):
    folder, _ = checkpoint(family)
    view = tracer.model_view(folder, tc.TEXT, context=10)
    cfg = json.loads((folder / "config.json").read_text())
    assert [row.kind for row in view.layers] == KINDS[family]
    for row in view.layers:
        trace = tracer.run(tracer.from_model(folder, tc.TEXT, row.layer))
        assert (row.heads, row.kv_heads) == (trace.heads, trace.scenario.groups)
        for h in range(row.heads):   # 8 tokens: the tile is the whole matrix, kept in float32
            np.testing.assert_allclose(row.tiles[h], trace[f"h{h}.weights"], rtol=1e-5, atol=1e-6)
    head_dim = trace.scenario.d_k
    per_token = 2 * trace.scenario.groups * head_dim
    kept = [min(10, 3) if k.startswith("sliding") else 10 for k in KINDS[family]]
    assert view.cache_bytes == view.itemsize * per_token * sum(kept)
    assert view.mha_cache_bytes == view.itemsize * 10 * len(kept) * 2 * trace.heads * head_dim
    assert view.itemsize == {"float32": 4, "bfloat16": 2}[cfg.get("dtype", cfg.get("torch_dtype"))]


def test_gpt_oss_sinks_and_experts_in_one_pass(tmp_path):
    """gpt-oss: sliding and full layers as layer_types says, each head's sink taking a share of
    its weights (rows sum to less than 1: the scores divide by Σ A, as the detector does)."""
    import moe_checkpoints as moe
    moe.build("gpt_oss", tmp_path, seed=2)
    cfg = json.loads((tmp_path / "config.json").read_text())
    view = tracer.model_view(tmp_path, tc.TEXT)
    assert [row.kind for row in view.layers] == [f"sliding {cfg['sliding_window']}" if t == "sliding_attention"
                                                  else "full" for t in cfg["layer_types"]]
    for row in view.layers:
        trace = tracer.run(tracer.from_model(tmp_path, tc.TEXT, row.layer))
        for h in range(row.heads):
            a = trace[f"h{h}.weights"]
            np.testing.assert_allclose(row.tiles[h], a, rtol=1e-5, atol=1e-6)
            assert a.sum() < a.shape[0] - 1e-3          # the sinks' shares are not the tokens'
            first = np.zeros_like(a)
            first[:, 0] = 1
            assert row.scores["first"][h] == pytest.approx((a * first).sum() / a.sum(), rel=1e-9)
