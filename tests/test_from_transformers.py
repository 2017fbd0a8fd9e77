"""tracer.from_transformers: a transformers model in memory traced as its saved folder would be.
Each family against transformers' own forward (its attentions, the attention's output and the
residual), the same arrays as from_model on the same weights, and the folder's refusals."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers", reason="the tiny models are made with transformers (test extra)")

import torch  # noqa: E402
import transformers  # noqa: E402

import tiny_checkpoints as tc  # noqa: E402
import tracer  # noqa: E402
from tracer import ScenarioError  # noqa: E402
from tracer.models import layer_arrays  # noqa: E402

FAMILIES = ("gpt2", "llama", "qwen3", "gemma2", "phi3", "bloom")   # plain, grouped, QK-norm, capped, fused, ALiBi
TOL = 3e-5   # transformers rounds norms, rotary tables and softmax to float32 (see test_model_families)


def tokenizer_of(family: str):
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tc.tokenizer(family))


def close(got, want, what: str) -> None:
    np.testing.assert_allclose(got, want, rtol=0, atol=TOL * max(1.0, float(np.abs(want).max())), err_msg=what)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_layer_is_transformers_own(checkpoint, family):
    _, model = checkpoint(family)
    tok = tokenizer_of(family)
    ids = tok(tc.TEXT)["input_ids"]
    for layer in range(model.config.num_hidden_layers):
        trace = tracer.run(tracer.from_transformers(model, tok, tc.TEXT, layer))
        want = tc.run_model(model, ids, layer)
        for key in ("x", "out", "residual"):
            close(trace.rows(key), want[key], f"{family} layer {layer}: {key}")
        weights = np.stack([trace.rows(f"h{h}.weights") for h in range(trace.heads)])
        close(weights, want["weights"], f"{family} layer {layer}: weights")


@pytest.mark.parametrize("family", tc.FAMILIES + tuple(tc.MORE))
def test_the_same_arrays_as_the_saved_folder(checkpoint, family):
    """The folder holds the model's float32 weights; the model in memory is those widened: the
    loader sees the same numbers either way, so every array is equal, bit for bit."""
    folder, model = checkpoint(family)
    layer = model.config.num_hidden_layers - 1
    a = tracer.models.layer_arrays(folder, tc.TEXT, layer)
    scenario = tracer.from_transformers(model, tokenizer_of(family), tc.TEXT, layer)
    b = tracer.from_model(folder, tc.TEXT, layer)
    assert scenario.tokens == b.tokens == a["tokens"]
    for name in ("x", "w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o", "q_norm", "k_norm", "alibi"):
        got, want = getattr(scenario, name), getattr(b, name)
        assert (got is None) == (want is None), name
        if got is not None:
            np.testing.assert_array_equal(got, want, err_msg=name)
    for name in ("norm_in", "out_norm"):
        got, want = getattr(scenario, name), getattr(b, name)
        assert (got is None) == (want is None), name
        for key in want or {}:
            np.testing.assert_array_equal(got[key], want[key], err_msg=f"{name}.{key}")
    assert scenario.softcap == b.softcap and scenario.mask == b.mask and scenario.rope == b.rope
    assert scenario.title.split(",", 1)[1] == b.title.split(",", 1)[1]   # the name: the model's, the folder's


@pytest.mark.parametrize("family", ["qwen3_moe", "gpt_oss"])
def test_experts_in_memory_are_the_folders(tmp_path, family):
    """Mixtures of experts: transformers fuses them in memory (gpt-oss stacks them, with biases);
    read back by the folder's names they give the folder's arrays, bit for bit."""
    import moe_checkpoints
    model = moe_checkpoints.build(family, tmp_path)
    tok = transformers.PreTrainedTokenizerFast.from_pretrained(tmp_path)
    layer = model.config.num_hidden_layers - 1
    got, want = tracer.from_transformers(model, tok, tc.TEXT, layer), tracer.from_model(tmp_path, tc.TEXT, layer)
    for name in ("x", "w_q", "w_k", "w_v", "w_o", "b_q", "b_o", "sinks"):
        a, b = getattr(got, name, None), getattr(want, name, None)
        assert (a is None) == (b is None), name
        if a is not None:
            np.testing.assert_array_equal(a, b, err_msg=name)


def test_bfloat16_is_widened_as_the_folder_does(tmp_path):
    """A bfloat16 model (as many are loaded today) against its bfloat16 folder."""
    model = tc.build("llama", tmp_path, seed=5, dtype=torch.bfloat16).to(torch.bfloat16)
    got = tracer.from_transformers(model, tokenizer_of("llama"), tc.TEXT, 1)
    want = tracer.from_model(tmp_path, tc.TEXT, 1)
    np.testing.assert_array_equal(got.x, want.x)
    np.testing.assert_array_equal(got.w_q, want.w_q)


def test_nothing_is_read_from_or_written_to_disk(checkpoint, monkeypatch):
    from tracer.models import hub, layer, weights
    _, model = checkpoint("gpt2")

    def refuse(*args, **kwargs):
        raise AssertionError("a folder was asked for")
    for module, name in ((layer, "find_checkpoint"), (hub, "find_checkpoint"), (weights, "Tensors"),
                         (layer, "Tensors"), (layer, "read_config")):
        monkeypatch.setattr(module, name, refuse)
    monkeypatch.setattr(type(model), "save_pretrained", refuse)
    assert tracer.from_transformers(model, tokenizer_of("gpt2"), tc.TEXT, 0).n == len(tokenizer_of("gpt2")(tc.TEXT)["input_ids"])


@pytest.mark.parametrize("family", ["gpt2", "gemma3_text"])
def test_the_model_dict_is_from_models_own(checkpoint, family):
    """`.model` says where a layer came from (the TUI's top bar, `show`'s heading): its layer, how
    many there are, its kind and every layer's; from_transformers gave None (no `kind` at all)."""
    folder, model = checkpoint(family)
    ours = tracer.from_transformers(model, tokenizer_of(family), tc.TEXT, 1).model
    theirs = tracer.from_model(folder, tc.TEXT, 1).model
    assert ours == {**theirs, "path": None}   # no folder: the model is in memory
    assert ours["layers"] == model.config.num_hidden_layers and ours["kind"] == ours["kinds"][1]
    from tui.session import Session   # the heads overview has no folder to build the other layers from
    trace = tracer.run(tracer.from_transformers(model, tokenizer_of(family), tc.TEXT, 1))
    assert Session.open(trace.scenario).layers(trace) == ([("this layer", trace)], 0)


def test_a_few_heads(checkpoint):
    _, model = checkpoint("llama")
    whole = tracer.run(tracer.from_transformers(model, tokenizer_of("llama"), tc.TEXT, 1))
    two = tracer.run(tracer.from_transformers(model, tokenizer_of("llama"), tc.TEXT, 1, heads=[2, 3]))
    np.testing.assert_array_equal(two["h0.weights"], whole["h2.weights"])
    np.testing.assert_array_equal(two["h1.weights"], whole["h3.weights"])


# ---------------------------------------------------------------- refusals, each naming its cause
class Model:
    """A real model with a state dict of our choosing."""

    def __init__(self, model, state: dict):
        self._model, self._state = model, state

    def __getattr__(self, name):
        return getattr(self._model, name)

    def state_dict(self) -> dict:
        return self._state


def test_a_model_of_an_unknown_family_is_refused():
    config = transformers.BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=16, vocab_size=300)
    bert = transformers.BertModel(config)
    with pytest.raises(ScenarioError, match=r"model_type: 'bert' is not supported; expected one of gpt2, llama"):
        tracer.from_transformers(bert, tokenizer_of("gpt2"), tc.TEXT, 0)


@pytest.mark.parametrize("layer", [3, -1, 1.0, True])
def test_a_layer_out_of_range_is_refused(checkpoint, layer):
    _, model = checkpoint("gpt2")
    with pytest.raises(ScenarioError, match=r"model.layer: expected a layer from 0 to 2 \(the model has 3\), got"):
        tracer.from_transformers(model, tokenizer_of("gpt2"), tc.TEXT, layer)


def test_another_models_tokenizer_is_refused(checkpoint):
    _, model = checkpoint("llama")   # a vocabulary of 300
    tok = tc.tokenizer("llama")
    tok.add_tokens([f"extra{i}" for i in range(250)])
    size = tok.get_vocab_size(with_added_tokens=True)
    assert size > 300
    with pytest.raises(ScenarioError, match=rf"tokenizer: has a vocabulary of {size} tokens; expected at most the "
                                            r"model's 300 \(the tokenizer of this llama model, not another's\)"):
        tracer.from_transformers(model, transformers.PreTrainedTokenizerFast(tokenizer_object=tok), tc.TEXT, 0)


@pytest.mark.parametrize("bad, message", [
    ("not a tokenizer", "tokenizer: expected the model's fast tokenizer"),
    (None, "tokenizer: expected the model's fast tokenizer"),
])
def test_what_is_not_a_tokenizer_is_refused(checkpoint, bad, message):
    _, model = checkpoint("gpt2")
    with pytest.raises(ScenarioError, match=message):
        tracer.from_transformers(model, bad, tc.TEXT, 0)


def test_what_is_not_a_model_is_refused():
    with pytest.raises(ScenarioError, match="model: expected a transformers model"):
        tracer.from_transformers("gpt2", tokenizer_of("gpt2"), tc.TEXT, 0)


def test_text_is_checked_as_for_a_folder(checkpoint):
    _, model = checkpoint("gpt2")
    with pytest.raises(ScenarioError, match="model.text: expected some text to tokenize, got an empty text"):
        tracer.from_transformers(model, tokenizer_of("gpt2"), "  ", 0)
    with pytest.raises(ScenarioError, match=r"model.text: gives \d+ tokens; expected at most 24"):
        tracer.from_transformers(model, tokenizer_of("gpt2"), tc.TEXT * 4, 0)


NAME = "transformer.h.1.attn.c_attn.weight"


@pytest.mark.parametrize("change, message", [
    (lambda s: s.pop(NAME), f"{NAME}: is missing from the model's state dict"),
    (lambda s: s.__setitem__(NAME, s[NAME][:, :10]), rf"{NAME}: has shape \(32, 10\); expected \(32, 96\)"),
    (lambda s: s.__setitem__(NAME, s[NAME].to(torch.int8)), f"{NAME}: has dtype I8; expected float64, float32"),
    (lambda s: s[NAME].__setitem__((3, 5), float("nan")), rf"{NAME}: holds nan at \[3, 5\]; expected finite weights"),
    (lambda s: s.__setitem__(NAME, torch.empty(32, 96, device="meta")), f"{NAME}: has no values"),
    (lambda s: s.__setitem__(NAME, s[NAME].tolist()), f"{NAME}: is a list of 32 in the model's state dict; expected "
                                                       "a torch tensor"),
    (lambda s: s.__setitem__(NAME, s[NAME].numpy()), rf"{NAME}: is an array of shape \(32, 96\) and dtype float64 in "
                                                      "the model's state dict; expected a torch tensor"),
    (lambda s: s.__setitem__("transformer.wte.weight", None), "transformer.wte.weight: is a NoneType in the model's"),
])
def test_broken_tensors_are_refused_by_name(checkpoint, change, message):
    _, model = checkpoint("gpt2")
    state = {k: v.clone() for k, v in model.state_dict().items()}
    change(state)
    with pytest.raises(ScenarioError, match=f"^the model in memory: {message}"):
        tracer.from_transformers(Model(model, state), tokenizer_of("gpt2"), tc.TEXT, 1)


def test_a_layer_count_beyond_the_blocks_of_the_state_dict_is_refused(checkpoint, monkeypatch):
    _, model = checkpoint("llama")
    monkeypatch.setattr(model.config, "num_hidden_layers", 10**7)
    with pytest.raises(ScenarioError, match=r"^the model in memory \(LlamaForCausalLM\): num_hidden_layers: says "
                                            r"10000000 layers, but the checkpoint's tensors hold the blocks of 3"):
        tracer.from_transformers(model, tokenizer_of("llama"), tc.TEXT, 0)


def test_torch_is_imported_only_when_a_model_is_handed_over():
    import subprocess
    import sys
    code = "import tracer, sys; tracer.run('by_hand')._repr_html_(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_arrays_of_a_folder_are_unchanged(checkpoint):
    """The folder's loader, now sharing its code with the model's: the same description as before."""
    folder, _ = checkpoint("gpt2")
    a = layer_arrays(folder, tc.TEXT, 1)
    assert a["description"].startswith(f"Layer 1 of 3 of the gpt2 checkpoint {str(folder)!r} on the text {tc.TEXT!r}. "
                                       "x is the residual stream entering the layer, computed by running the earlier blocks")


@pytest.mark.parametrize("family", ["gpt2", "qwen3_moe"])
def test_the_state_dict_is_read_by_the_names_the_folder_gives(tmp_path, family):
    """transformers 5 fuses a mixture's experts in memory and splits them again when it saves: the
    tensors handed to the loader are named as in the saved folder, whatever the family."""
    from safetensors import safe_open
    from tracer.models.state import saved_state
    if family == "gpt2":
        model = transformers.GPT2LMHeadModel(tc.config("gpt2"))
    else:
        model = transformers.AutoModelForCausalLM.from_config(transformers.Qwen3MoeConfig(
            hidden_size=32, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2, intermediate_size=48,
            moe_intermediate_size=16, num_experts=4, num_experts_per_tok=2, vocab_size=100, head_dim=8))
    model.save_pretrained(tmp_path, safe_serialization=True)
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as f:
        saved = {name: f.get_tensor(name) for name in f.keys()}
    state = saved_state(model)
    assert set(saved) <= set(state)
    for name, tensor in saved.items():
        torch.testing.assert_close(state[name], tensor, rtol=0, atol=0, msg=name)


def test_a_state_dict_transformers_cannot_turn_back_is_refused_in_one_line(checkpoint):
    _, model = checkpoint("gpt2")

    class Bare:   # a config and a state dict, but not a module transformers knows
        config = model.config

        def state_dict(self):
            return model.state_dict()
    with pytest.raises(ScenarioError, match=r"^the model in memory: model: its state dict cannot be put in the saved "
                                            r"layout \(AttributeError: .*\); expected a model that transformers can save$"):
        tracer.from_transformers(Bare(), tokenizer_of("gpt2"), tc.TEXT, 0)


def test_a_tokenizer_without_the_models_special_tokens_is_refused(checkpoint):
    """A smaller vocabulary than the model's is no proof of a mismatch (tables are padded), but one
    without the model's end-of-text token is another model's tokenizer."""
    _, model = checkpoint("gpt2")
    tok = tokenizer_of("gpt2")   # 290 tokens, for a model of 300
    other = transformers.GPT2LMHeadModel(transformers.GPT2Config(**{**model.config.to_dict(), "eos_token_id": 295}))
    with pytest.raises(ScenarioError, match=r"tokenizer: has no token 295, the model's eos_token_id; expected the "
                                            r"tokenizer of this gpt2 model, not another's"):
        tracer.from_transformers(other, tok, tc.TEXT, 0)
    assert tracer.from_transformers(model, tok, tc.TEXT, 0).n == len(tok(tc.TEXT)["input_ids"])
