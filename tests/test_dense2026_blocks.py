"""The dense families of 2026 (CONTRACT §17), every layer of a tiny checkpoint of each (built with
transformers, its mechanisms switched on: tests/tiny_dense2026.py) run by tracer.models.dense2026
from the saved folder and compared with transformers' own eager forward: the residual stream into
the layer (Gemma 3n: its AltUp streams), what the attention reads, every head's weights and the
attention's output. transformers keeps these models' norms (and Llama 4's rotation) in float32
even in a float64 model, hence ~1e-5 rather than 1e-12; each mechanism is then switched off in
the NumPy forward to show that it moves the weights by far more than that."""
from __future__ import annotations

import numpy as np
import pytest

import tiny_dense2026 as td
from tiny_dense2026 import tiny  # noqa: F401  (the fixture)
from tracer.models import dense2026
from tracer.models.weights import Tensors

FAMILIES = list(td.CONFIGS)
TOL = 1e-4          # relative to the largest value, and absolute on the weights
MOVED = 1e-2        # what switching a mechanism off must change the weights by, at least


def mine(folder, data: dict, ids: list[int], **changes) -> list:
    return dense2026.run(Tensors(folder), {**data, **changes}, ids)


def off_by(a: np.ndarray, b: np.ndarray) -> float:
    """The largest difference, relative to b's largest value."""
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("family", FAMILIES)
def test_every_layer_equals_transformers(tiny, family):
    folder, data, ids, ref = tiny(family)
    got = mine(folder, data, ids)
    assert len(got) == len(ref) == td.CONFIGS[family][1]["num_hidden_layers"]
    for i, (g, r) in enumerate(zip(got, ref)):
        assert g.x.shape == r["x"].shape and off_by(g.x, r["x"]) < TOL, f"layer {i}: the stream into it"
        assert off_by(g.h, r["h"]) < TOL, f"layer {i}: what its attention reads"
        assert g.weights.shape == r["weights"].shape
        np.testing.assert_allclose(g.weights, r["weights"], atol=TOL, err_msg=f"layer {i}: weights")
        np.testing.assert_allclose(g.weights.sum(axis=-1), 1.0, atol=1e-12)
        assert off_by(g.out, r["out"]) < TOL, f"layer {i}: the attention's output"


@pytest.mark.parametrize("family, sources", [("gemma4_text", [0, 1, 2, 2, 1]), ("gemma3n_text", [0, 1, 0, 1])])
def test_shared_layers_attend_with_the_source_layers_keys_and_values(tiny, family, sources):
    """Layers past L − num_kv_shared_layers hold no k_proj or v_proj: they read the keys and
    values of the last earlier layer of their type, the very arrays that layer attended with."""
    folder, data, ids, ref = tiny(family)
    got = mine(folder, data, ids)
    assert [g.source for g in got] == sources
    names = Tensors(folder).names
    for i, src in enumerate(sources):
        own = any(f"layers.{i}.self_attn.k_proj" in n for n in names)
        assert own == (src == i)
        assert got[i].k is got[src].k and got[i].v is got[src].v


def test_gemma4_global_layers_take_values_from_the_keys_projection(tiny):
    """K = V: a global layer has no v_proj; its v is the gainless RMS norm of x·W_K (never turned),
    with the global layers' own head size (16) and key/value heads (1)."""
    folder, data, ids, ref = tiny("gemma4_text")
    w = Tensors(folder)
    got = mine(folder, data, ids)
    assert "model.layers.1.self_attn.v_proj.weight" not in w.names
    raw = got[1].h @ w["model.layers.1.self_attn.k_proj.weight"].T                  # n × 16
    v = raw / np.sqrt((raw ** 2).mean(axis=-1, keepdims=True) + data["rms_norm_eps"])
    np.testing.assert_allclose(got[1].v[0], v, rtol=1e-12, atol=1e-12)
    assert got[1].q.shape[-1] == 16 and got[0].q.shape[-1] == 8 and got[1].k.shape[0] == 1


@pytest.mark.parametrize("family, changes, layers", [
    ("llama4_text", dict(attn_temperature_tuning=False), [1, 3]),        # the NoPE layers' τ
    ("llama4_text", dict(attention_chunk_size=1000), [0, 2]),            # chunks of 3 on rotary layers
    ("llama4_text", dict(use_qk_norm=False), [0, 2]),                    # the weightless L2 norm
    ("mistral4", "no_temperature", [0, 1]),                              # τ on every layer
    ("gemma4_text", "default_rope", [1, 4]),                             # proportional rotary
    ("olmo3", "default_rope", [3]),                                      # yarn on the global layer
    ("gemma3n_text", dict(activation_sparsity_pattern=[0.0] * 4), [1, 2, 3]),
])
def test_each_mechanism_moves_the_weights(tiny, family, changes, layers):
    """The comparison above can see each mechanism: without it the NumPy forward is off by more
    than MOVED on the layers that have it, far beyond TOL."""
    folder, data, ids, ref = tiny(family)
    params = data.get("rope_parameters")
    if changes == "no_temperature":
        changes = dict(rope_parameters={**params, "llama_4_scaling_beta": 0.0})
    elif changes == "default_rope":
        glob = {"rope_type": "default", "rope_theta": params["full_attention"]["rope_theta"]}
        changes = dict(rope_parameters={**params, "full_attention": glob})
    got = mine(folder, data, ids, **changes)
    for i in layers:
        assert np.max(np.abs(got[i].weights - ref[i]["weights"])) > MOVED, f"layer {i}"


def test_llama4_nope_layers_warm_their_queries(tiny):
    """τ(p) = 1 + β·ln(1 + ⌊(p + 1)/F⌋) with β = 0.5, F = 2, on the NoPE layers only."""
    folder, data, ids, ref = tiny("llama4_text")
    got = mine(folder, data, ids)
    import math
    want = [1 + 0.5 * math.log(1 + (p + 1) // 2) for p in range(len(ids))]
    np.testing.assert_allclose(got[1].extra["temperature"], want, rtol=1e-15)
    assert "temperature" not in got[0].extra


def test_llama4_rotary_layers_see_only_their_chunk(tiny):
    folder, data, ids, ref = tiny("llama4_text")
    for i, chunked in enumerate([True, False, True, False]):
        w = ref[i]["weights"]
        p, j = np.indices(w.shape[1:])
        hidden = (j > p) | ((j // 3 != p // 3) if chunked else False)
        assert np.all(w[:, hidden] == 0) and np.all(w[:, ~hidden] > 0)


def _as_published(family: str, data: dict) -> dict:
    """config.json as published checkpoints (and older transformers) spell it."""
    data = dict(data)
    if family == "gemma4_text":     # the global layers' sizes by name, not a per_layer_config
        data.pop("per_layer_config")
        data.update(global_head_dim=16, num_global_key_value_heads=1)
    elif family == "minimax_m2":    # the legacy rotary_dim alone says how many features turn
        data["rope_theta"] = data.pop("rope_parameters")["rope_theta"]
    elif family == "olmo3":         # rope_theta and a rope_scaling that scales the global layers only
        data.pop("rope_parameters")
        data.update(rope_theta=1e4, rope_scaling=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=8))
    elif family == "gemma3n_text":  # the sliding layers' base under its own key
        data.pop("rope_parameters")
        data.update(rope_theta=5e4, rope_local_base_freq=100.0)
    elif family == "llama4_text":   # Llama 4 Scout's spelling of its llama3 scaling
        data.pop("rope_parameters")
        data.update(rope_theta=1e4, rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                                      high_freq_factor=4.0, original_max_position_embeddings=8))
    return data


@pytest.mark.parametrize("family", ["gemma4_text", "minimax_m2", "olmo3", "gemma3n_text", "llama4_text"])
def test_configs_as_published_read_as_transformers_reads_them(tiny, tmp_path, family):
    """The same weights under config.json rewritten the published way, loaded by transformers from
    the folder and by the NumPy forward from the same folder."""
    import json
    import shutil
    import transformers
    folder, data, ids, _ = tiny(family)
    shutil.copytree(folder, tmp_path / family)
    data = _as_published(family, data)
    (tmp_path / family / "config.json").write_text(json.dumps(data))
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / family, attn_implementation="eager",
                                                              experts_implementation="eager").double()
    ref = td.attention_record(model, ids)
    for i, (g, r) in enumerate(zip(mine(tmp_path / family, data, ids), ref)):
        np.testing.assert_allclose(g.weights, r["weights"], atol=TOL, err_msg=f"layer {i}")
        assert off_by(g.out, r["out"]) < TOL
