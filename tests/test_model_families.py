"""Each newer family (tests/tiny_checkpoints.py's MORE) against transformers' eager forward, at
every layer: the stream entering the layer, each head's weights, the attention module's output
and the residual after it (through the norm of the output where the family has one); and proof
that each family's own mechanism matters to that comparison."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers", reason="the tiny checkpoints are made with transformers (test extra)")

import tiny_checkpoints as tc  # noqa: E402
from tracer.models import layer_arrays  # noqa: E402

# transformers rounds norms, rotary tables and the softmax to float32 (2^-24 relative) even in a
# float64 model; sharp heads (scores of tens) and three layers amplify that to a few 1e-6 of the
# largest value. A wrong mechanism moves the numbers by 1e-2 or more (see the last test).
TOL = 3e-5


def ids_of(folder, text=tc.TEXT):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text).ids


def close(got, want, key: str, tol: float = TOL) -> None:
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * max(1.0, float(np.abs(want).max())), err_msg=key)


def sdpa(folder):
    """Falcon with ALiBi as its SDPA path runs it: transformers' eager path (the one
    output_attentions takes) adds the bias twice, once with the scores and once in the mask."""
    import torch
    import transformers
    return transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="sdpa",
                                                             dtype=torch.float64).eval()


@pytest.mark.parametrize("family", tc.MORE)
def test_every_layer_matches_transformers(checkpoint, family):
    folder, model = checkpoint(family)
    ids = ids_of(folder)
    twice = family == "falcon_alibi"
    plain = sdpa(folder) if twice else model
    for layer in range(model.config.num_hidden_layers):
        arrays = layer_arrays(folder, tc.TEXT, layer)
        freqs, factor = tc.rotary_of(model, layer)
        got = tc.attend(arrays, freqs, factor)
        want = tc.run_model(plain, ids, layer, attentions=not twice)
        for key in ("x", "out", "residual"):
            close(got[key], want[key], f"{family} layer {layer}: {key}")
        if twice:   # eager's weights are those of the doubled bias, on eager's own x
            eager = tc.run_model(model, ids, layer)
            want["weights"] = eager["weights"]
            got = tc.attend(dict(arrays, x=eager["x"], alibi=2 * arrays["alibi"]), freqs, factor)
        close(got["weights"], want["weights"], f"{family} layer {layer}: weights")


def _mask(layer_masks):
    return lambda a, layer: a["mask"] == layer_masks[layer]


# family → what its layers' arrays say (a check per layer: arrays, layer → bool)
DECLARED = {
    "llama_linear": lambda a, i: a["rope"]["scaling"] == dict(type="linear", factor=3.0),
    "llama3": lambda a, i: a["rope"]["scaling"] == dict(type="llama3", factor=8.0, original_max_position_embeddings=8,
                                                        low_freq_factor=1.0, high_freq_factor=4.0),
    "yarn": lambda a, i: a["rope"]["scaling"] == dict(type="yarn", factor=4.0, original_max_position_embeddings=8,
                                                      beta_fast=8.0, beta_slow=0.5,
                                                      attention_factor=pytest.approx(0.1 * np.log(4.0) + 1)),
    "qwen3": lambda a, i: a["q_norm"].shape == (4, 8) and a["k_norm"].shape == (2, 8) and a["qk_norm_scope"] == "head"
    and a["mask"] == ("causal", "sliding:3", "sliding:3")[i] and len(a["bq"]) == 4,
    "gemma2": lambda a, i: a["softcap"] == 3.0 and a["defaults"] == {"scale": np.sqrt(13)} and "out_norm" in a
    and a["mask"] == ("sliding:3", "causal", "sliding:3")[i] and "q_norm" not in a,
    "gemma3_text": lambda a, i: "softcap" not in a and a["qk_norm_scope"] == "head" and a["rope"] == (
        dict(base=50.0, style="half", offset=0), dict(base=500.0, style="half", offset=0,
                                                      scaling=dict(type="linear", factor=2.0)))[i % 2],
    "olmo2": lambda a, i: a.get("norm_in") is None and a["qk_norm_scope"] == "all"
    and a["q_norm"].shape == (4, 8) and "out_norm" in a,
    "smollm3": lambda a, i: (a["rope"] is None) == (i == 1) and a["mask"] == ("causal", "sliding:3", "causal")[i],
    "phi3": lambda a, i: a["mask"] == "sliding:5" and len(a["k"]) == 2,
    "phi3_partial": lambda a, i: a["rope"] == dict(base=500.0, style="half", offset=0, dims=4) and a["mask"] == "causal",
    "bloom": lambda a, i: a["rope"] is None and list(a["alibi"]) == [2 ** -e for e in (2, 4, 6, 8, 1, 3)]
    and a["norm_in"]["kind"] == "layer" and a["bq"] is not None,
    "falcon": lambda a, i: len(a["k"]) == 1 and a["rope"] is not None and a["bq"] is None,
    "falcon_new": lambda a, i: len(a["k"]) == 2 and a["bq"] is not None,
    "falcon_alibi": lambda a, i: len(a["k"]) == 4 and a["rope"] is None
    and np.allclose(a["alibi"], np.array([2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8]) / np.sqrt(8), rtol=1e-15),
}


@pytest.mark.parametrize("family", tc.MORE)
def test_each_layer_carries_its_familys_mechanism(checkpoint, family):
    folder, model = checkpoint(family)
    for layer in range(model.config.num_hidden_layers):
        assert DECLARED[family](layer_arrays(folder, tc.TEXT, layer), layer), (family, layer)


def _plain(a, layer, model):
    """The layer rotated with the unscaled frequencies base^(−2i/d)."""
    return np.asarray(a["rope"]["base"]) ** (-np.arange(0, 8, 2) / 8), 1.0


# family, layer, a change to the arrays (or to the rotation): each must move the comparison
BROKEN = [
    ("llama_linear", 2, None), ("llama3", 2, None), ("yarn", 2, None),
    ("qwen3", 2, lambda a: a.pop("q_norm") is not None and a.pop("k_norm") is not None),
    ("qwen3", 2, lambda a: a.update(mask="causal")),
    ("gemma2", 2, lambda a: a.pop("softcap")), ("gemma2", 1, lambda a: a.pop("defaults")),
    ("gemma2", 1, lambda a: a.pop("out_norm")), ("gemma2", 0, lambda a: a.update(mask="causal")),
    ("gemma2", 1, lambda a: a.update(norm_in=dict(a["norm_in"], gain=a["norm_in"]["gain"] - 1))),
    ("gemma3_text", 2, lambda a: a.update(q_norm=a["q_norm"] - 1, k_norm=a["k_norm"] - 1)),
    ("olmo2", 2, lambda a: a.update(qk_norm_scope="head")),
    ("smollm3", 1, lambda a: a.update(mask="causal")),
    ("phi3", 2, lambda a: a.update(mask="causal")),
    ("phi3_partial", 2, None),   # every pair turned
    ("bloom", 2, lambda a: a.update(alibi=0 * a["alibi"])),
    ("falcon_alibi", 2, lambda a: a.update(alibi=np.sqrt(8) * a["alibi"])),
]


@pytest.mark.parametrize("family,layer,change", BROKEN)
def test_each_mechanism_matters_to_the_comparison(checkpoint, family, layer, change):
    """The comparison above can fail: without the family's mechanism (or with it done wrong) the
    weights or the residual move by far more than TOL."""
    folder, model = checkpoint(family)
    arrays = layer_arrays(folder, tc.TEXT, layer)
    freqs, factor = tc.rotary_of(model, layer)
    if change is None:
        freqs, factor = _plain(arrays, layer, model)
    else:
        change(arrays)
    got = tc.attend(arrays, freqs, factor)
    want = tc.run_model(model, ids_of(folder), layer)
    if family == "falcon_alibi":
        got = tc.attend(dict(arrays, alibi=2 * arrays["alibi"]), freqs, factor)
    moved = max(np.abs(got[k] - want[k]).max() / max(1.0, np.abs(want[k]).max()) for k in ("weights", "residual"))
    assert moved > 1e-3


@pytest.mark.parametrize("family", ["llama_linear", "llama3", "yarn", "gemma3_text"])
def test_older_config_spellings_give_the_same_layers(checkpoint, tmp_path, family):
    """rope_theta at the top level and rope_scaling with "type" (Gemma 3: rope_local_base_freq
    for the sliding layers), as older transformers and most published checkpoints write them."""
    import json
    import shutil
    folder, model = checkpoint(family)
    old = tmp_path / "old"
    shutil.copytree(folder, old)
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(tc.old_rope(cfg.pop("rope_parameters")))
    (old / "config.json").write_text(json.dumps(cfg))
    assert "rope_scaling" in cfg and "type" in cfg["rope_scaling"]
    for layer in range(model.config.num_hidden_layers):
        new, then = layer_arrays(folder, tc.TEXT, layer), layer_arrays(old, tc.TEXT, layer)
        assert new["rope"] == then["rope"]
        np.testing.assert_array_equal(new["x"], then["x"])


PUBLISHED = {   # rope settings of published checkpoints: (head_dim, positions, rope_parameters)
    "Llama-3.1-8B": (128, 131072, dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
                                       high_freq_factor=4.0, original_max_position_embeddings=8192)),
    "Llama-3.2-1B": (64, 131072, dict(rope_type="llama3", rope_theta=500000.0, factor=32.0, low_freq_factor=1.0,
                                      high_freq_factor=4.0, original_max_position_embeddings=8192)),
    "Qwen2.5 with YaRN": (128, 131072, dict(rope_type="yarn", rope_theta=1000000.0, factor=4.0,
                                            original_max_position_embeddings=32768)),
    "DeepSeek-style YaRN": (64, 163840, dict(rope_type="yarn", rope_theta=10000.0, factor=40.0, mscale=1.0,
                                             mscale_all_dim=1.0, beta_fast=32, beta_slow=1,
                                             original_max_position_embeddings=4096)),
    "linear ×4": (64, 8192, dict(rope_type="linear", rope_theta=10000.0, factor=4.0)),
}


def _against_transformers(head_dim: int, positions: int, params: dict) -> None:
    """Our frequencies and yarn's attention factor, from config.json as transformers writes it,
    against transformers' own functions. Those compute in float32 (`dtype=torch.float`), and
    Llama 3's blend of the two bands multiplies a rounding of its position in the band by up to
    factor − 1 (5e-6 of a frequency in a generated case): they are run here with float64 in
    torch.float's place, the same formula without float32's rounding, which ours must equal."""
    import torch
    import transformers
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from tracer.models.config import parse
    from tracer.mechanisms.rotary.frequencies import attention_factor, frequencies
    cfg = transformers.LlamaConfig(hidden_size=head_dim * 2, num_attention_heads=2, head_dim=head_dim,
                                   max_position_embeddings=positions, rope_parameters=dict(params))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch, "float", torch.float64)
        mp.setattr(torch, "float32", torch.float64)
        theirs, factor = ROPE_INIT_FUNCTIONS[params["rope_type"]](cfg)
    assert theirs.dtype == torch.float64
    data = {**cfg.to_dict(), "intermediate_size": 8, "num_hidden_layers": 1}
    spec = parse(data).kinds[0].rope
    np.testing.assert_allclose(frequencies(spec, head_dim), theirs.numpy(), rtol=1e-12, atol=0)
    assert attention_factor(spec) == pytest.approx(factor, rel=1e-12)


@pytest.mark.parametrize("name", PUBLISHED)
def test_scaled_frequencies_of_published_checkpoints_are_transformers(name):
    _against_transformers(*PUBLISHED[name])


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=25)
@given(half=st.integers(2, 64), theta=st.floats(50, 2e6), factor=st.floats(1.1, 64), low=st.floats(0.5, 2),
       gap=st.floats(0.5, 8), original=st.integers(16, 16384), fast=st.floats(4, 64), slow=st.floats(0.25, 2),
       kind=st.sampled_from(["linear", "llama3", "yarn"]))
def test_scaled_frequencies_are_transformers_on_generated_settings(half, theta, factor, low, gap, original, fast,
                                                                    slow, kind):
    params = dict(rope_type=kind, rope_theta=theta, factor=factor)
    if kind == "llama3":
        params.update(low_freq_factor=low, high_freq_factor=low + gap, original_max_position_embeddings=original)
    elif kind == "yarn":
        params.update(beta_fast=fast, beta_slow=slow, original_max_position_embeddings=original)
    _against_transformers(2 * half, 4 * original, params)


@pytest.mark.parametrize("family,heads", [("qwen3", [3, 0]), ("gemma3_text", [1, 2]), ("bloom", [5, 1, 4]),
                                          ("falcon_alibi", [2])])
def test_a_few_heads_keep_their_norms_and_slopes(checkpoint, family, heads):
    from tracer.models import keep_heads
    folder, _ = checkpoint(family)
    arrays = layer_arrays(folder, tc.TEXT, 2)
    full = tc.attend(arrays)["weights"] if arrays["rope"] is None else None
    if full is None:   # rotated with the plain frequencies: the same for the full layer and its part
        full = tc.attend(arrays, *_plain(arrays, 2, None))["weights"]
        part = tc.attend(keep_heads(arrays, heads), *_plain(arrays, 2, None))["weights"]
    else:
        part = tc.attend(keep_heads(arrays, heads))["weights"]
    np.testing.assert_allclose(part, full[heads], rtol=0, atol=1e-12)


def test_heads_of_a_layer_normed_over_every_head_are_refused(checkpoint):
    from tracer.errors import ScenarioError
    from tracer.models import keep_heads
    folder, _ = checkpoint("olmo2")
    with pytest.raises(ScenarioError, match="model.heads: expected no heads list"):
        keep_heads(layer_arrays(folder, tc.TEXT, 1), [0])


@pytest.mark.parametrize("family", tc.MORE)
def test_the_trace_of_every_layer_is_transformers(checkpoint, family):
    """Through the tracer (each mechanism a step): x, each head's weights, out and the residual."""
    import tracer
    from tracer import ids as step_ids
    folder, model = checkpoint(family)
    twice = family == "falcon_alibi"
    plain = sdpa(folder) if twice else model
    for layer in range(model.config.num_hidden_layers):
        trace = tracer.run(tracer.from_model(folder, tc.TEXT, layer))
        want = tc.run_model(plain, ids_of(folder), layer, attentions=not twice)
        for key in ("x", "out", "residual"):
            close(trace.rows(key), want[key], f"{family} layer {layer}: {key}")
        if not twice:
            got = np.stack([trace.rows(step_ids.step_id("weights", h)) for h in range(trace.heads)])
            close(got, want["weights"], f"{family} layer {layer}: weights")
