"""The hybrid families' blocks (tracer/models/hybrid_*.py) against transformers' eager forward on tiny
checkpoints made with it (tests/tiny_hybrid.py), every layer kind present: the residual stream into
each layer, computed by our own earlier blocks; each layer's mixer output; the softmax layers'
weights; the linear layers' every step (q, k, v after the convolution, α, β, o, the gated norm).
transformers runs these in float32, so float32's precision is the bar."""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
import tiny_hybrid  # noqa: E402
from tiny_hybrid import close  # noqa: E402

from tracer.errors import ScenarioError  # noqa: E402
from tracer.mechanisms.linear.formula import l2norm  # noqa: E402
from tracer.models import hybrid_block, hybrid_tensors  # noqa: E402
from tracer.models.config import config_json  # noqa: E402
from tracer.models.hybrid_config import hybrid_of  # noqa: E402
from tracer.models.state import StateTensors  # noqa: E402
from tracer.models.weights import Tensors  # noqa: E402

IDS = [1, 5, 17, 42, 8, 99, 3, 250, 7, 64, 12]
FAMILIES = ["qwen3_next", "qwen3_5_text", "qwen3_5", "olmo_hybrid", "olmo_hybrid_nope", "kimi_linear",
            "kimi_linear_q_rank"]
_built: dict = {}


@pytest.fixture(scope="module", params=FAMILIES)
def checkpoint(request, tmp_path_factory):
    """(folder, model, transformers' per-layer record, our config, our tensors), built once."""
    family = request.param
    if family not in _built:
        folder = tmp_path_factory.mktemp(family)
        model = tiny_hybrid.build(family, folder)
        _built[family] = (folder, model, tiny_hybrid.run_model(model, IDS), hybrid_of(config_json(folder)),
                          Tensors(folder))
    return _built[family]


def test_every_layer_equals_transformers(checkpoint):
    _, model, ref, cfg, t = checkpoint
    assert any(cfg.linear) and not all(cfg.linear)
    x = hybrid_block.embed(t, IDS)
    for i, want in enumerate(ref):
        close(x, want["x"])                                   # the residual into layer i
        after, parts = hybrid_block.run_block(x, t, cfg, i)
        close(parts["out"], want["out"])                      # the mixer's output
        if cfg.linear[i]:
            q, k = (np.repeat(parts[key], cfg.v_heads // cfg.k_heads, axis=0) for key in ("q", "k"))
            close(q, l2norm(want["q"].astype(np.float64)))
            close(k, l2norm(want["k"].astype(np.float64)))
            for key in ("v", "decay", "beta", "o", "z"):
                close(parts[key], want[key])
            read = np.einsum("htij,hti->htj", parts["state"], q) / np.sqrt(cfg.d_k)    # o_t = S_tᵀ·q_t
            np.testing.assert_allclose(read, parts["o"], rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(parts["implicit"] @ parts["v"], parts["o"], rtol=1e-9, atol=1e-9)
        else:
            close(parts["weights"], want["weights"])
        x = after


def test_the_stream_into_the_last_layer_is_the_models(checkpoint):
    _, _, ref, cfg, t = checkpoint
    close(hybrid_block.stream(t, cfg, IDS, cfg.layers - 1), ref[-1]["x"])


@pytest.mark.parametrize("family", ["qwen3_next", "kimi_linear"])
def test_a_state_dict_in_memory_reads_as_the_folder(family, tmp_path):
    """transformers keeps the experts stacked (experts.gate_up_proj), the three convolutions fused
    and Kimi's forget gate under forget_gate. in memory; they read as the saved files do."""
    model = tiny_hybrid.build(family, tmp_path)
    ref = tiny_hybrid.run_model(model, IDS)
    state = model.state_dict()
    assert any(k.endswith("experts.gate_up_proj") for k in state) and any(k.endswith(".conv1d.weight") for k in state)
    cfg = hybrid_of(model.config.to_dict())
    close(hybrid_block.stream(StateTensors(state), cfg, IDS, cfg.layers - 1), ref[-1]["x"])


def test_configs_as_published(checkpoint):
    folder, model, _, cfg, t = checkpoint
    data = json.loads((folder / "config.json").read_text())
    if data["model_type"] == "qwen3_5":
        assert cfg.model_type == "qwen3_5_text" and hybrid_tensors.prefix(t) == "model.language_model."
    if cfg.model_type == "kimi_linear":
        assert cfg.family.rule == "kda" and cfg.linear == (True, False, True, False) and cfg.rope is None
        assert cfg.sparse == (False, True, True, True) and cfg.mla["kv_rank"] == 8
    if cfg.model_type == "olmo_hybrid":
        assert cfg.beta_max == (1.0 if "nope" in str(folder) else 2.0)
        assert (cfg.rope is None) == ("nope" in str(folder))
    if cfg.model_type == "qwen3_next":
        assert cfg.sparse == (True, True, False, True) and cfg.rope["dims"] == 4 and cfg.conv == 3
    fp = cfg.footprint()
    assert fp.state == cfg.v_heads * cfg.d_k * cfg.d_v


def test_kimi_published_linear_attn_config_and_qwen3_5_nesting():
    kimi = dict(model_type="kimi_linear", hidden_size=2304, num_hidden_layers=8, num_attention_heads=32,
                intermediate_size=9216, kv_lora_rank=512, q_lora_rank=None, qk_nope_head_dim=128, qk_rope_head_dim=64,
                v_head_dim=128, num_experts=256, num_experts_per_token=8, moe_intermediate_size=1024,
                first_k_dense_replace=1,
                linear_attn_config=dict(num_heads=32, head_dim=128, short_conv_kernel_size=4, full_attn_layers=[4, 8],
                                        kda_layers=[1, 2, 3, 5, 6, 7]))
    cfg = hybrid_of(kimi)
    assert cfg.linear == (True, True, True, False, True, True, True, False)
    assert (cfg.v_heads, cfg.d_k, cfg.conv) == (32, 128, 4)
    nested = hybrid_of(dict(model_type="qwen3_5", text_config=dict(
        model_type="qwen3_5_text", hidden_size=1024, num_hidden_layers=24, num_attention_heads=8,
        num_key_value_heads=2, head_dim=256, intermediate_size=3584, linear_num_key_heads=16,
        linear_num_value_heads=16, linear_key_head_dim=128, linear_value_head_dim=128,
        rope_parameters=dict(rope_type="default", rope_theta=1e7, partial_rotary_factor=0.25,
                             mrope_section=[11, 11, 10], mrope_interleaved=True))))
    assert nested.linear == (True, True, True, False) * 6 and nested.rope["dims"] == 64
    assert nested.footprint().break_even == 256


@pytest.mark.parametrize("data, message", [
    (dict(model_type="llama"), "model_type: 'llama' is not a hybrid family; expected one of qwen3_next"),
    (dict(model_type="qwen3_5", text_config="x"), "text_config: expected the text model's config"),
    (dict(model_type="qwen3_5_text", hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
          intermediate_size=8, layer_types=["linear_attention", "sliding_attention"]),
     "layer_types: expected a list of 2 of linear_attention or full_attention"),
    (dict(model_type="qwen3_5_text", hidden_size=32, num_hidden_layers=0, num_attention_heads=4),
     "num_hidden_layers: expected a whole number ≥ 1, got a number"),
    (dict(model_type="qwen3_5_text", hidden_size=32, num_hidden_layers=4, num_attention_heads=4, intermediate_size=8,
          linear_num_key_heads=3, linear_num_value_heads=4),
     "linear_num_value_heads: expected a multiple of the 3 key heads, got 4"),
])
def test_bad_configs_are_refused_by_key(data, message):
    with pytest.raises(ScenarioError, match=message):
        hybrid_of(data)


def test_a_missing_tensor_is_named(tmp_path):
    from safetensors.numpy import load_file, save_file
    tiny_hybrid.build("olmo_hybrid", tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    del tensors["model.layers.0.linear_attn.g_proj.weight"]
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    cfg = hybrid_of(config_json(tmp_path))
    with pytest.raises(ScenarioError, match="model.layers.0.linear_attn.g_proj.weight: is missing"):
        hybrid_block.stream(Tensors(tmp_path), cfg, IDS, 1)
