"""Qwen3-MoE and gpt-oss checkpoints against transformers' eager forward (every layer: the stream
entering it, each head's weights, the attention's output), gpt-oss's experts stored as MXFP4, its
sinks and its yarn kept per head (sinks written by hand: mechanisms/test_sinks.py)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

pytest.importorskip("transformers", reason="the tiny checkpoints are made with transformers (test extra)")
pytest.importorskip("safetensors", reason="checkpoints need the models extra")

import moe_checkpoints as mc  # noqa: E402
import tiny_checkpoints as tc  # noqa: E402
import tracer  # noqa: E402
from tracer.models import mxfp4  # noqa: E402
from tui.cli import main  # noqa: E402

LAYERS = range(mc.SIZES["num_hidden_layers"])


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """family → (folder, transformers' model), made once; "mxfp4": gpt-oss with MXFP4 experts."""
    root = tmp_path_factory.mktemp("moe")
    out = {fam: (root / fam, mc.build(fam, root / fam, seed=3)) for fam in mc.CONFIGS}
    mc.to_mxfp4(root / "gpt_oss", root / "mxfp4")
    return out


def ids_of(folder):
    from tracer.models.tokens import encode
    return encode(folder, tc.TEXT, 64)[0]


def check_layer(folder, model, layer):
    ref = tc.run_model(model, ids_of(folder), layer)
    trace = tracer.run(tracer.from_model(folder, tc.TEXT, layer))
    heads = mc.SIZES["num_attention_heads"]
    weights = np.array([trace.rows(f"h{h}.weights") for h in range(heads)])
    close = dict(rtol=1e-4, atol=1e-4 * np.abs(ref["out"]).max())
    np.testing.assert_allclose(trace.scenario.x, ref["x"], rtol=1e-4, atol=1e-4 * np.abs(ref["x"]).max())
    np.testing.assert_allclose(weights, ref["weights"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(trace.rows("out"), ref["out"], **close)
    return trace, weights


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("family", list(mc.CONFIGS))
def test_every_layer_against_transformers(folders, family, layer):
    folder, model = folders[family]
    trace, weights = check_layer(folder, model, layer)
    if family == "gpt_oss":   # the sink takes what the tokens leave: each row sums to 1 − sink
        sink = np.array([trace.rows(f"h{h}.sink")[:, 0] for h in range(weights.shape[0])])
        np.testing.assert_allclose(weights.sum(axis=-1) + sink, 1.0, rtol=1e-12)
        assert sink.max() > 0.05 and (weights.sum(axis=-1) < 0.95).any()   # the sinks matter here


def test_the_tiny_checkpoints_exercise_what_they_test(folders):
    """Layer 1 of Qwen3-MoE is dense (mlp_only_layers); the others route to 2 of 6 experts;
    gpt-oss alternates sliding and full layers and its SwiGLU limit clamps some values."""
    from tracer.models.config import read_config
    q = read_config(folders["qwen3_moe"][0])
    assert q.moe["sparse"] == [True, False, True] and q.moe["norm_topk"]
    g = read_config(folders["gpt_oss"][0])
    assert [k.window for k in g.kinds] == [3, None, 3]


def test_mxfp4_folder_against_transformers_dequantized(folders):
    import transformers
    folder = folders["gpt_oss"][0].parent / "mxfp4"
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, quantization_config=transformers.Mxfp4Config(dequantize=True), attn_implementation="eager",
        dtype="float32").eval()
    for layer in LAYERS:
        check_layer(folder, model, layer)
    # and the quantization did change the experts: the float folder's stream differs
    plain = tracer.from_model(folders["gpt_oss"][0], tc.TEXT, 2).x
    assert not np.allclose(tracer.from_model(folder, tc.TEXT, 2).x, plain, rtol=1e-6)


@settings(max_examples=15, deadline=None)
@given(st.data())
def test_dequantize_against_the_spec_read_value_by_value(data):
    shape = data.draw(st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 2)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    blocks = rng.integers(0, 256, shape + (16,), dtype=np.uint8)
    scales = rng.integers(100, 150, shape, dtype=np.uint8)
    np.testing.assert_array_equal(mxfp4.dequantize(blocks, scales), mc.reference_dequantize(blocks, scales))


def test_one_byte_by_hand():
    """0x2F: low nibble 15 = −6, high nibble 2 = 1; scale 128 = 2¹; layout in × out (transposed)."""
    blocks = np.zeros((1, 1, 16), np.uint8)
    blocks[0, 0, 0] = 0x2F
    got = mxfp4.dequantize(blocks, np.array([[128]], np.uint8))
    assert got.shape == (32, 1) and got[0, 0] == -12.0 and got[1, 0] == 2.0 and not got[2:].any()


# ------------------------------------------------------------------- refusals
def refused(capsys, folder, *words):
    capsys.readouterr()
    assert main(["show", "--model", str(folder), "--text", tc.TEXT, "--layer", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("attnsim: error: "), err
    for word in words:
        assert word in err[0], (word, err[0])
    return err[0]


@pytest.fixture
def copy(folders, tmp_path):
    import shutil
    shutil.copytree(folders["gpt_oss"][0].parent / "mxfp4", tmp_path / "c")
    return tmp_path / "c"


def rewrite(folder, change):
    from safetensors.numpy import load_file, save_file
    tensors = load_file(folder / "model.safetensors")
    change(tensors)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})


def test_blocks_and_scales_that_disagree(capsys, copy):
    name = "model.layers.0.mlp.experts.gate_up_proj_scales"   # 2 blocks of 32 inputs a row; 1 left
    rewrite(copy, lambda t: t.update({name: t[name][:, :, :1].copy()}))
    refused(capsys, copy, name, "shape", "blocks and scales agreeing")


def test_a_scale_byte_of_255_is_refused_as_the_nan_it_is(capsys, copy):
    """E8M0's byte 255 is NaN in the OCP MX spec; it was read as 2^128. Every expert's row 5,
    block 1 holds it: the first expert read is refused by tensor and place."""
    name = "model.layers.0.mlp.experts.gate_up_proj_scales"
    rewrite(copy, lambda t: t[name].__setitem__((slice(None), 5, 1), 255))
    line = refused(capsys, copy, name, "holds the scale byte 255 at [", ", 5, 1], which is NaN in the OCP MX format")
    assert "expected bytes 0 to 254" in line
    assert np.isnan(mxfp4.dequantize(np.zeros((1, 1, 16), np.uint8), np.array([[255]], np.uint8))).all()


def test_another_quantized_format_names_the_tensor_and_dtype(capsys, copy):
    import torch
    from safetensors.torch import load_file, save_file
    tensors = load_file(copy / "model.safetensors")
    name = "model.layers.1.self_attn.k_proj.weight"
    tensors[name] = tensors[name].to(torch.float8_e4m3fn)   # DeepSeek-V3's format
    save_file(tensors, copy / "model.safetensors", metadata={"format": "pt"})
    refused(capsys, copy, name, "F8_E4M3")


@pytest.mark.parametrize("key", ["num_local_experts", "num_experts_per_tok"])
def test_a_config_without_the_expert_counts(capsys, copy, key):
    cfg = json.loads((copy / "config.json").read_text())
    del cfg[key]
    (copy / "config.json").write_text(json.dumps(cfg))
    refused(capsys, copy, "config.json", key, "is missing")


def test_gpt_oss_yarn_without_truncation_matches_transformers(folders):
    """gpt-oss's yarn keeps the ramp's ends fractional (truncate false): the frequencies and the
    attention factor as transformers computes them, and not as the truncated ramp would give."""
    from tracer.mechanisms.rotary import frequencies as rope
    from tracer.models.config import read_config
    folder, model = folders["gpt_oss"]
    spec = read_config(folder).kinds[1].rope
    freqs, factor = tc.rotary_of(model, 1)
    np.testing.assert_allclose(rope.frequencies(spec, 16), freqs, rtol=1e-6)
    assert rope.attention_factor(spec) == pytest.approx(factor, rel=1e-6)
    truncated = dict(spec, scaling={k: v for k, v in spec["scaling"].items() if k != "truncate"})
    assert not np.allclose(rope.frequencies(truncated, 16), freqs, rtol=1e-6)


def test_chosen_heads_keep_their_own_sinks(folders):
    """[model] heads = [3, 0]: each kept head's weights and sink as in the whole layer's trace."""
    from tracer.models.layer import keep_heads, layer_arrays
    folder = folders["gpt_oss"][0]
    whole = tracer.run(tracer.from_model(folder, tc.TEXT, 1))
    some = tracer.run(tracer.from_arrays(**keep_heads(layer_arrays(folder, tc.TEXT, 1), [3, 0])))
    for i, h in enumerate((3, 0)):
        np.testing.assert_allclose(some.rows(f"h{i}.sink"), whole.rows(f"h{h}.sink"), rtol=1e-12)
        np.testing.assert_allclose(some.rows(f"h{i}.weights"), whole.rows(f"h{h}.weights"), rtol=1e-12)
