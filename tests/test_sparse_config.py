"""config.json of the sparse families read as transformers 5.24 reads it (its config classes are
the reference: published configs' older keys included), rotary frequencies equal to its rotary
modules', and bad input refused in one line naming the key or the tensor."""
from __future__ import annotations

import json

import numpy as np
import pytest

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

import tiny_sparse as ts  # noqa: E402
from tracer.mechanisms.rotary import frequencies as rope  # noqa: E402
from tracer.errors import ScenarioError  # noqa: E402
from tracer.models import dsa_block, deepseek_v4_stream  # noqa: E402
from tracer.models.sparse_config import read_dsa, read_v4  # noqa: E402

V4_SIZES = dict(hidden_size=32, num_attention_heads=4, head_dim=16, q_lora_rank=10, o_groups=2, o_lora_rank=6,
                n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=12, num_hidden_layers=6)
V4_VARIANTS = [
    {},                                                                      # every default
    dict(compress_ratios=[0, 4, 128, 4, 0, 128], num_hash_layers=1, qk_rope_head_dim=8),   # legacy keys
    dict(compress_rate_csa=2, compress_rate_hca=16, rope_theta=77.0, compress_rope_theta=900.0,
         rope_parameters=dict(rope_type="yarn", factor=8.0, original_max_position_embeddings=64, beta_fast=16.0,
                              beta_slow=2.0)),
    dict(layer_types=["sliding_attention"] * 6, mlp_layer_types=["moe"] * 6, partial_rotary_factor=0.5),
]


def _data(cfg) -> dict:
    return json.loads(cfg.to_json_string())


@pytest.mark.parametrize("extra", V4_VARIANTS)
def test_v4_config_as_transformers_reads_it(extra):
    cfg = transformers.DeepseekV4Config(**V4_SIZES, **extra)
    raw = {**V4_SIZES, **extra, "model_type": "deepseek_v4"}    # as a published config.json might say it
    for data in (_data(cfg), raw):
        got = read_v4(data)
        assert got.kinds == cfg.layer_types and got.mlp == cfg.mlp_layer_types
        assert got.rates == cfg.compress_rates and got.rope_dims == cfg.qk_rope_head_dim
        rot = transformers.models.deepseek_v4.modeling_deepseek_v4.DeepseekV4RotaryEmbedding(cfg)
        for kind in ("main", "compress"):
            np.testing.assert_allclose(rope.frequencies(got.rope[kind], got.rope_dims),
                                       getattr(rot, f"{kind}_inv_freq").double().numpy(), rtol=1e-6)
            assert rope.attention_factor(got.rope[kind]) == pytest.approx(getattr(rot, f"{kind}_attention_scaling"))


@pytest.mark.parametrize("extra", [{}, dict(index_topk_freq=3, index_skip_topk_offset=1),
                                   dict(index_topk_pattern="FSFSSF"), dict(indexer_types=["full", "shared"] * 3)])
def test_glm_indexer_schedule_as_transformers_reads_it(extra):
    sizes = dict(num_hidden_layers=6, hidden_size=32, num_attention_heads=4, q_lora_rank=10, kv_lora_rank=6,
                 qk_rope_head_dim=4, qk_nope_head_dim=6, v_head_dim=5, index_head_dim=8)
    cfg = transformers.GlmMoeDsaConfig(**sizes, **extra)
    raw = {**sizes, **extra, "model_type": "glm_moe_dsa", "intermediate_size": 40, "n_routed_experts": 8,
           "num_experts_per_tok": 2, "moe_intermediate_size": 12}
    for data in (_data(cfg), raw):
        got = read_dsa(data)
        assert got.index["types"] == cfg.indexer_types
        assert got.index["style"] == "interleaved"
    v32 = read_dsa(_data(transformers.DeepseekV32Config(**sizes)))
    assert v32.index["style"] == "half" and v32.index["types"] == ["full"] * 6


@pytest.mark.parametrize("key, value, message", [
    ("index_topk", 0, "index_topk: expected a whole number ≥ 1, got a number (0)"),
    ("index_n_heads", -2, "index_n_heads: expected a whole number ≥ 1"),
    ("index_head_dim", 2, "index_head_dim: expected at least qk_rope_head_dim (4)"),
    ("indexer_types", ["shared", "full", "full"], "indexer_types: expected \"full\" for layer 0"),
])
def test_dsa_config_refusals(key, value, message):
    data = _data(ts.config("glm_moe_dsa"))
    data[key] = value
    with pytest.raises(ScenarioError) as err:
        read_dsa(data)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("key, value, message", [
    ("index_topk", 0, "index_topk: expected a whole number ≥ 1, got a number (0)"),
    ("o_groups", 3, "o_groups: expected a divisor of the 4 heads, got 3"),
    ("layer_types", ["sliding_attention", "full_attention", "sliding_attention"], "layer_types: expected a list"),
    ("scoring_func", "relu", "scoring_func: 'relu' is not supported"),
])
def test_v4_config_refusals(key, value, message):
    data = _data(ts.config("deepseek_v4"))
    data[key] = value
    with pytest.raises(ScenarioError) as err:
        read_v4(data)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("family, forward, tensor", [
    ("glm_moe_dsa", dsa_block.run, "model.layers.0.self_attn.indexer.wq_b.weight"),
    ("deepseek_v4", deepseek_v4_stream.run, "model.layers.1.attn.indexer.wq_b.weight"),
])
def test_an_indexer_whose_shapes_disagree_is_named(tmp_path, family, forward, tensor):
    """config.json says 6 index heads where the tensors hold 8: refused naming the first tensor."""
    ts.build(family, tmp_path, seed=1)
    data = json.loads((tmp_path / "config.json").read_text())
    data["index_n_heads"] = 6
    (tmp_path / "config.json").write_text(json.dumps(data))
    with pytest.raises(ScenarioError) as err:
        forward(tmp_path, [3, 4, 5, 6, 7, 8, 9, 10, 11], 1)
    assert str(err.value).count(tensor) == 1 and "\n" not in str(err.value)
    assert "has shape (64, 10); expected (48, 10)" in str(err.value) and "index_n_heads 6" in str(err.value)
