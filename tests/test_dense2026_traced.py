"""The dense families of 2026 traced at every layer (CONTRACT §17; models/dense2026/traced.py):
`tracer.from_model` on a tiny checkpoint of each family (built with transformers, its mechanisms
switched on: tests/tiny_dense2026.py), run by the trace's own steps, against transformers' eager
forward caught by hooks: the stream into the layer (Gemma 3n: what its attention reads), every
head's weights, and the attention's output after W_O. transformers keeps these models' norms (and
Llama 4's rotation) in float32 inside a float64 model: agreement to 1e-4, not 1e-12. Mistral 4 (alone and
inside Mistral Small 4's mistral3 wrapper): latent attention with every query warmed by τ(p)."""
from __future__ import annotations

import numpy as np
import pytest

import tiny_dense2026 as td
import tracer
from tiny_dense2026 import tiny  # noqa: F401  (the fixture)
from tracer.models import layer_arrays
from tui.cli import main

TRACED = ["gemma4_text", "gemma4", "gemma3n_text", "llama4_text", "llama4", "glm4_moe", "olmo3", "nanochat",
          "minimax_m2", "mistral4", "mistral3"]
TOL = 1e-4


def off_by(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("family", TRACED)
def test_every_layer_traced_equals_transformers(tiny, family):
    folder, data, ids, ref = tiny(family)
    for i, r in enumerate(ref):
        trace = tracer.run(tracer.from_model(folder, td.TEXT, i))
        heads = trace.scenario.heads
        weights = np.stack([trace.rows(f"h{h}.weights") for h in range(heads)])
        np.testing.assert_allclose(weights, r["weights"], atol=TOL, err_msg=f"{family} layer {i}: weights")
        assert off_by(trace.rows("out"), r["out"]) < TOL, f"{family} layer {i}: the attention's output"
        x = r["h"] if family == "gemma3n_text" else r["x"]
        assert off_by(trace.rows("x"), x) < TOL, f"{family} layer {i}: x"


def test_gemma4s_mechanisms_are_steps(tiny):
    folder, data, ids, ref = tiny("gemma4_text")
    shared = tracer.run(tracer.from_model(folder, td.TEXT, 4))   # reads layer 1's keys and values (global, K = V)
    ids_ = [s.id for s in shared.steps]
    assert "kv_x" in ids_ and "h0.v_norm" not in ids_ and "kv0.v_norm" in ids_
    assert shared.step("kv0.k").title.startswith("Keys of layer 1, shared: this layer computes none")
    assert shared.step("kv0.v").formula == "V = K   (the values are the keys: W_V = W_K)"
    np.testing.assert_array_equal(shared.rows("h0.scaled"), shared.rows("h0.scores"))   # scale 1
    assert shared.scenario.model["kind"] == "global, KV shared from layer 1"
    assert "computes no keys or values: they are layer 1's" in shared.scenario.description
    freqs = shared.rows("freqs")[:, 0]   # proportional rotary on the global layers: 16 × 0.25 / 2 = 2 pairs turn
    assert (freqs[:2] > 0).all() and (freqs[2:] == 0).all()


def test_llama4s_chunks_and_temperature(tiny):
    folder, data, ids, ref = tiny("llama4_text")
    chunked = tracer.run(tracer.from_model(folder, td.TEXT, 0))
    assert chunked.scenario.mask == "chunked:3" and chunked.step("h0.q_norm").inputs == ("h0.q_rot",)
    nope = tracer.run(tracer.from_model(folder, td.TEXT, 1))
    n = nope.scenario.n
    tau = 1 + 0.5 * np.log1p(np.floor((np.arange(n) + 1) / 2))   # attn_scale 0.5, floor_scale 2
    np.testing.assert_allclose(nope.rows("tau")[:, 0], tau, rtol=1e-15)
    assert not any(s.id.endswith("_rot") for s in nope.steps)


def test_show_model_from_the_command_line(tiny, capsys):
    folder, data, ids, ref = tiny("nanochat")
    capsys.readouterr()
    assert main(["show", "--model", str(folder), "--text", td.TEXT, "--layer", "1", "--step", "h0.q_norm"]) == 0
    assert "h0.q_norm" in capsys.readouterr().out
    assert main(["show", "--model", str(folder), "--text", td.TEXT, "--layer", "3"]) == 2
    assert "--layer: expected a layer from 0 to 2 (the model has 3), got 3" in capsys.readouterr().err


def test_mistral4s_latent_queries_are_warmed(tiny):
    """Every layer's queries, both parts, times τ(p) = 1 + β·ln(1 + ⌊p/F⌋) (β 0.5, F 4: shift 0, not Llama 4's
    + 1); without it the weights would be off (the temperature is what makes them equal transformers')."""
    folder, data, ids, ref = tiny("mistral4")
    scenario = tracer.from_model(folder, td.TEXT, 1)
    trace = tracer.run(scenario)
    n = scenario.n
    tau = 1 + 0.5 * np.log1p(np.floor(np.arange(n) / 4))
    np.testing.assert_allclose(trace.rows("tau")[:, 0], tau, rtol=1e-15)
    q = np.concatenate([trace.rows("h2.q_nope"), trace.rows("h2.q_pe")], axis=1)
    np.testing.assert_allclose(trace.rows("h2.q_temp"), q * tau[:, None], rtol=1e-14)
    np.testing.assert_allclose(trace.rows("h2.absorbed"), trace.rows("h2.scores"), rtol=1e-10, atol=1e-10)
    arrays = layer_arrays(folder, td.TEXT, 1)
    cold = tracer.run(tracer.from_arrays(**{**arrays, "rope": {**arrays["rope"], "temperature": None}}))
    assert np.abs(cold.rows("h2.weights") - ref[1]["weights"][2]).max() > 1e-2
    assert scenario.model["kind"] == "latent, rope yarn ×4, τ"
    assert "its queries are multiplied by τ(p) = 1 + 0.5·ln(1 + ⌊p/4⌋) (q_temp)" in scenario.description


def test_mistral4_shows_from_the_command_line_and_refuses_biases(tiny, tmp_path, capsys):
    import json
    import shutil
    folder, data, ids, ref = tiny("mistral3")
    capsys.readouterr()   # what building it printed
    assert main(["show", "--model", str(folder), "--text", td.TEXT, "--layer", "1", "--step", "h0.q_temp"]) == 0
    assert "h0.q_temp  Queries, warmed (head 0):  [q_nope | q_pe] · τ(p), per token" in capsys.readouterr().out
    copy = tmp_path / "biased"
    shutil.copytree(folder, copy)
    (copy / "config.json").write_text(json.dumps({**data, "text_config": {**data["text_config"], "attention_bias": True}}),
                                      encoding="utf-8")
    assert main(["show", "--model", str(copy), "--text", td.TEXT, "--layer", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "attention_bias: expected false for a traced latent attention layer" in err


def test_from_transformers_in_memory_is_the_folders(tiny):
    """Gemma 4 in memory (its shared layer): the same arrays as from the saved folder."""
    import transformers
    folder, data, ids, ref = tiny("gemma4_text")
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").double()
    tokenizer = transformers.PreTrainedTokenizerFast.from_pretrained(folder)
    mine = tracer.run(tracer.from_transformers(model, tokenizer, td.TEXT, 4))
    saved = tracer.run(tracer.from_model(folder, td.TEXT, 4))
    weights = np.stack([mine.rows(f"h{h}.weights") for h in range(4)])
    np.testing.assert_allclose(weights, ref[4]["weights"], atol=TOL)
    np.testing.assert_allclose(mine.rows("out"), saved.rows("out"), rtol=1e-6, atol=1e-9)
    assert mine.scenario.model["kind"] == "global, KV shared from layer 1" and mine.scenario.model["path"] is None


def test_mistral4_in_memory_is_the_folders(tiny):
    """Mistral4ForCausalLM in memory (no auto class maps to it): the same arrays as from the saved folder."""
    import transformers
    folder, data, ids, ref = tiny("mistral4")
    model = transformers.Mistral4ForCausalLM.from_pretrained(folder, attn_implementation="eager",
                                                              experts_implementation="eager").double()
    tokenizer = transformers.PreTrainedTokenizerFast.from_pretrained(folder)
    mine = tracer.run(tracer.from_transformers(model, tokenizer, td.TEXT, 1))
    weights = np.stack([mine.rows(f"h{h}.weights") for h in range(4)])
    np.testing.assert_allclose(weights, ref[1]["weights"], atol=TOL)
    np.testing.assert_allclose(mine.rows("out"), tracer.run(tracer.from_model(folder, td.TEXT, 1)).rows("out"),
                               rtol=1e-6, atol=1e-9)
    assert mine.scenario.model["kind"] == "latent, rope yarn ×4, τ" and mine.scenario.model["path"] is None


def test_the_description_says_what_x_is_and_the_temperature(tiny):
    folder, data, ids, ref = tiny("gemma3n_text")
    three_n = tracer.from_model(folder, td.TEXT, 0).description
    assert "x is what the layer's attention reads: the active one of its AltUp streams" in three_n
    assert "residual is not the next stream" in three_n
    folder, data, ids, ref = tiny("llama4_text")
    nope = tracer.from_model(folder, td.TEXT, 1).description
    assert "its queries are multiplied by τ(p) = 1 + 0.5·ln(1 + ⌊(p + 1)/2⌋) (q_temp)" in nope
    assert ": 1 on this text" not in nope   # floor 2: warmed from position 1 on


def test_the_description_names_an_unusual_rotation(tiny):
    folder, data, ids, ref = tiny("nanochat")
    text = tracer.from_model(folder, td.TEXT, 0).description
    assert "q and k are turned first and normed after" in text and "turns the other way, by −p·θ" in text
    folder, data, ids, ref = tiny("gemma4_text")
    assert "only the first 0.25 of each head's pairs turn (proportional rotary)" in \
        tracer.from_model(folder, td.TEXT, 1).description


@pytest.mark.parametrize("change, message", [
    (dict(num_kv_shared_layers=5), "num_kv_shared_layers: every layer shares, so no layer computes keys and values; "
                                   "expected a configuration transformers can run"),
    (dict(num_kv_shared_layers=4), "layer 1 (full_attention) shares keys and values, but no layer before layer 1 is "
                                   "full_attention"),
    (dict(use_bidirectional_attention="all"), "use_bidirectional_attention: \"all\" is not supported; expected causal "
                                              "attention\n"),
])
def test_a_configuration_that_cannot_run_is_one_line(tiny, tmp_path, capsys, change, message):
    import json
    import shutil
    folder, data, ids, ref = tiny("gemma4_text")
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    (copy / "config.json").write_text(json.dumps({**data, **change}), encoding="utf-8")
    capsys.readouterr()
    assert main(["show", "--model", str(copy), "--text", td.TEXT, "--layer", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
