"""tracer.models against transformers on tiny random checkpoints of every family: the layer's
input x, every head's weights, out and residual; old and new config keys, shards, fp16 and bf16."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tiny_checkpoints as tc
import tracer
from tracer.models import layer_arrays
from tracer.models.tokens import piece


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """family → (folder, float64 transformers model), built once for the module."""
    out = {}
    for family in tc.FAMILIES:
        folder = tmp_path_factory.mktemp(family)
        out[family] = folder, tc.build(family, folder, seed=len(out))
    return out


def ids_of(folder, text=tc.TEXT):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text).ids


def scale(a):
    return float(np.abs(a).max())


@pytest.mark.parametrize("layer", [0, 1, 2])
def test_gpt2_matches_transformers_to_1e9(saved, layer):
    folder, model = saved["gpt2"]
    arrays = layer_arrays(folder, tc.TEXT, layer)
    want = tc.run_model(model, ids_of(folder), layer)
    got = tc.attend(arrays)
    for key in ("x", "weights", "out", "residual"):
        np.testing.assert_allclose(got[key], want[key], rtol=0, atol=1e-9 * max(1.0, scale(want[key])), err_msg=key)
    assert arrays["rope"] is None and arrays["norm_in"]["kind"] == "layer"
    assert len(arrays["q"]) == len(arrays["k"]) == tc.SIZES["heads"]


def test_the_heads_are_sharp_so_the_comparison_means_something(saved):
    folder, model = saved["gpt2"]
    weights = tc.run_model(model, ids_of(folder), 1)["weights"]
    assert weights[:, 3:].max(axis=-1).mean() > 0.6   # far from uniform over ≥ 4 keys


@pytest.mark.parametrize("family", ["llama", "mistral", "qwen2"])
@pytest.mark.parametrize("layer", [0, 2])
def test_llama_family_matches_a_float64_forward_and_transformers(saved, family, layer):
    folder, model = saved[family]
    ids = ids_of(folder)
    arrays = layer_arrays(folder, tc.TEXT, layer)
    got = tc.attend(arrays)
    exact = tc.llama_reference(tc.state(model), ids, layer, theta=500.0)
    loose = tc.run_model(model, ids, layer)   # transformers keeps norms, rotary and softmax in float32
    for key in ("x", "weights", "out", "residual"):
        np.testing.assert_allclose(got[key], exact[key], rtol=0, atol=1e-9 * max(1.0, scale(exact[key])),
                                   err_msg=key)
        np.testing.assert_allclose(got[key], loose[key], rtol=0, atol=1e-4 * max(1.0, scale(loose[key])),
                                   err_msg=key)
    assert arrays["rope"] == dict(base=500.0, style="half", offset=0)
    assert len(arrays["q"]) == tc.SIZES["heads"] and len(arrays["k"]) == len(arrays["v"]) == tc.SIZES["groups"]
    assert (arrays["bq"] is not None) == (family == "qwen2") and arrays["bo"] is None
    assert arrays["norm_in"]["kind"] == "rms" and arrays["norm_in"]["bias"] is None


def test_the_reference_forward_agrees_with_transformers(saved):
    """The float64 reference is itself checked against transformers (loosely, see above)."""
    folder, model = saved["qwen2"]
    ids = ids_of(folder)
    exact = tc.llama_reference(tc.state(model), ids, 2, theta=500.0)
    loose = tc.run_model(model, ids, 2)
    np.testing.assert_allclose(exact["weights"], loose["weights"], atol=1e-4)
    np.testing.assert_allclose(exact["x"], loose["x"], atol=1e-4 * scale(loose["x"]))


def test_layer_arrays_keys_and_shapes(saved):
    folder, _ = saved["qwen2"]
    a = layer_arrays(folder, tc.TEXT, 1)
    n, d, hd = len(ids_of(folder)), tc.SIZES["d_model"], tc.SIZES["d_model"] // tc.SIZES["heads"]
    assert a["x"].shape == (n, d) and a["x"].dtype == np.float64
    assert all(m.shape == (d, hd) for m in a["q"] + a["k"] + a["v"])
    assert a["o"].shape == (tc.SIZES["heads"] * hd, d)
    assert [b.shape for b in a["bq"]] == [(hd,)] * tc.SIZES["heads"]
    assert a["mask"] == "causal" and a["residual"] == dict(norm="none") and a["layout"] == "rows"
    assert a["tokens"][0] == "<s>" and len(a["tokens"]) == n


def test_old_and_new_rope_keys_give_the_same_layer(tmp_path, saved):
    """A top-level rope_theta (older writers) and rope_parameters (transformers 5) both count;
    theta is 500, not the default 10000, so a loader that ignored it would fail."""
    folder, model = saved["llama"]
    old = tmp_path / "old"
    tc.build("llama", old, seed=1, old_rope_key=True)
    cfg = json.loads((old / "config.json").read_text())
    assert cfg["rope_theta"] == 500.0 and "rope_parameters" not in cfg
    assert "rope_parameters" in json.loads((folder / "config.json").read_text())
    got = tc.attend(layer_arrays(old, tc.TEXT, 1))
    want = tc.llama_reference(tc.state(model), ids_of(folder), 1, theta=500.0)
    np.testing.assert_allclose(got["weights"], want["weights"], atol=1e-10)


def test_a_sharded_checkpoint(tmp_path):
    model = tc.build("gpt2", tmp_path, seed=7, shard="20KB")
    assert (tmp_path / "model.safetensors.index.json").is_file() and len(list(tmp_path.glob("*.safetensors"))) > 2
    got = tc.attend(layer_arrays(tmp_path, tc.TEXT, 2))
    want = tc.run_model(model, ids_of(tmp_path), 2)
    np.testing.assert_allclose(got["out"], want["out"], atol=1e-9 * scale(want["out"]))


@pytest.mark.parametrize("family,dtype", [("gpt2", "float16"), ("llama", "bfloat16"), ("qwen2", "float16")])
def test_half_precision_weights_are_widened_exactly(tmp_path, family, dtype):
    import torch
    model = tc.build(family, tmp_path, seed=3, dtype=getattr(torch, dtype))
    header = (tmp_path / "model.safetensors").read_bytes()[:4096]
    assert {"float16": b'"F16"', "bfloat16": b'"BF16"'}[dtype] in header
    ids = ids_of(tmp_path)
    got = tc.attend(layer_arrays(tmp_path, tc.TEXT, 1))
    if family == "gpt2":
        want = tc.run_model(model, ids, 1)
    else:   # the saved half-precision values, widened by torch: the same numbers as ours
        want = tc.llama_reference(tc.state(model), ids, 1, theta=500.0)
    for key in ("x", "weights", "out"):
        np.testing.assert_allclose(got[key], want[key], atol=1e-9 * max(1.0, scale(want[key])), err_msg=key)


def test_pieces_show_spaces_as_one_visible_mark(saved):
    from tokenizers import Tokenizer
    for family, space in (("gpt2", "Ġ"), ("llama", "▁")):
        folder = saved[family][0]
        tokens = Tokenizer.from_file(str(folder / "tokenizer.json")).encode(tc.TEXT).tokens
        assert any(t.startswith(space) for t in tokens)
        assert layer_arrays(folder, tc.TEXT, 0)["tokens"] == [t.replace(space, "␣") for t in tokens]
    assert layer_arrays(saved["llama"][0], "the cat", 0)["tokens"][:2] == ["<s>", "␣the"]
    assert piece("Ġ", True) == "␣" and piece("▁a", False) == "␣a" and piece("Ċ", True) == "\\n"
    assert piece("Ã©", True) == "é"     # two bytes of byte-level BPE, one character


def test_keep_heads_keeps_their_groups(saved):
    from tracer.models import keep_heads
    a = layer_arrays(saved["mistral"][0], tc.TEXT, 1)
    full = tc.attend(a)
    for heads in ([2, 3], [0, 3], [3], [1, 0, 2, 3]):
        part = keep_heads(a, heads)
        np.testing.assert_allclose(tc.attend(part)["weights"], full["weights"][heads], atol=1e-12)


# ---------------------------------------------------------------- through the tracer
@pytest.mark.parametrize("family", tc.FAMILIES)
def test_the_trace_of_a_checkpoint_layer(saved, family):
    from tracer import ids
    folder, model = saved[family]
    layer = 1
    trace = tracer.run(tracer.from_model(folder, tc.TEXT, layer))
    want = (tc.run_model(model, ids_of(folder), layer) if family == "gpt2" else
            tc.llama_reference(tc.state(model), ids_of(folder), layer, theta=500.0))
    for h in range(tc.SIZES["heads"]):
        np.testing.assert_allclose(trace.rows(ids.step_id("weights", h)), want["weights"][h], atol=1e-9)
    np.testing.assert_allclose(trace.rows("x"), want["x"], atol=1e-9 * scale(want["x"]))
    for key in ("out", "residual"):
        np.testing.assert_allclose(trace.rows(key), want[key], atol=1e-9 * scale(want[key]), err_msg=key)
    theirs = tc.run_model(model, ids_of(folder), layer)   # and transformers itself (loosely for Llama)
    np.testing.assert_allclose(np.stack([trace.rows(ids.step_id("weights", h)) for h in range(tc.SIZES["heads"])]),
                               theirs["weights"], atol=1e-9 if family == "gpt2" else 1e-4)
    np.testing.assert_allclose(trace.rows("residual"), theirs["residual"],
                               atol=(1e-9 if family == "gpt2" else 1e-4) * scale(theirs["residual"]))


@pytest.mark.parametrize("family", tc.FAMILIES)
def test_a_checkpoint_layer_keeps_its_weights_in_c_order(saved, family):
    """As every trace's kernels read them: a checkpoint's matrices arrive transposed (out × in), and
    a float32 trace would otherwise cast them through strides each time."""
    sc = tracer.from_model(saved[family][0], tc.TEXT, 1)
    for name in ("w_q", "w_k", "w_v", "w_o"):
        assert getattr(sc, name).flags.c_contiguous, name


def test_a_scenario_casts_its_weights_once(saved, monkeypatch):
    """Scenario.cast: the float32 weights every float32 trace reads, made once and equal to the
    cast; the scenario's own array where nothing changes; made anew above CAST_BYTES."""
    from tracer.scenario import core
    sc = tracer.from_model(saved["gpt2"][0], tc.TEXT, 1)
    first = sc.cast(sc.w_q, np.float32)
    assert first is sc.cast(sc.w_q, np.float32) and first.flags.c_contiguous
    np.testing.assert_array_equal(first, sc.w_q.astype(np.float32))
    assert sc.cast(sc.w_q, np.float64) is sc.w_q
    monkeypatch.setattr(core, "CAST_BYTES", 8)
    assert sc.cast(sc.w_k, np.float32) is not sc.cast(sc.w_k, np.float32)
    np.testing.assert_allclose(tracer.run(sc, dtype="float32").rows("out"), tracer.run(sc).rows("out"), rtol=1e-4,
                               atol=1e-5)


def test_a_few_heads_of_a_grouped_layer_through_the_tracer(saved):
    from tracer import ids
    folder, _ = saved["qwen2"]
    full = tracer.run(tracer.from_model(folder, tc.TEXT, 2))
    for heads in ([2, 3], [1, 2]):
        part = tracer.run(tracer.from_model(folder, tc.TEXT, 2, heads=heads))
        assert part.scenario.heads == len(heads)
        for new, old in enumerate(heads):
            np.testing.assert_allclose(part.rows(ids.step_id("weights", new)),
                                       full.rows(ids.step_id("weights", old)), atol=1e-12)


@settings(max_examples=200)
@given(st.text(min_size=1, max_size=20))
def test_byte_level_pieces_read_back_as_the_text(text):
    """The tokenizers library's own byte-to-character map, read back: any text comes out as
    itself, spaces as ␣ and control characters escaped."""
    from tokenizers import pre_tokenizers
    (written, _), = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False).pre_tokenize_str(text)
    escapes = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
    want = "".join("␣" if c in " ▁" else c if c.isprintable() else escapes.get(c, f"\\x{ord(c):02x}")
                   for c in text)
    assert piece(written, True) == want
