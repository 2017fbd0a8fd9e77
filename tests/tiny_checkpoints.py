"""Tiny random checkpoints of every family built with transformers (seeded, weights scaled up,
biases, norm gains and each family's switches set away from their defaults), and references
written apart: a float64 Llama forward, and an attention layer with every family's mechanisms."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

SENTENCES = ["the cat sat on the mat and the dog sat on the log",
             "a bird flew over the river bank to the old mill",
             "money in the bank is safe; the river bank is muddy"] * 4
TEXT = "the cat sat on the river bank"
FAMILIES = ("gpt2", "llama", "mistral", "qwen2")
SIZES = dict(d_model=32, heads=4, groups=2, layers=3, positions=24, vocab=300, d_ff=48)
# the newer families: config class and the switches that set each apart, chosen so that they
# matter on TEXT's 8 tokens (windows of 3, a pretraining length of 8 for the rope scalings, caps
# the scores reach); the Llama scalings are spelled as transformers 5 writes them
ORIGINAL = 8
MORE = {
    "llama_linear": ("Llama", dict(rope_parameters=dict(rope_type="linear", factor=3.0, rope_theta=500.0))),
    "llama3": ("Llama", dict(rope_parameters=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                                  high_freq_factor=4.0, original_max_position_embeddings=ORIGINAL,
                                                  rope_theta=500.0))),
    "yarn": ("Llama", dict(rope_parameters=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=ORIGINAL,
                                                beta_fast=8.0, beta_slow=0.5, rope_theta=500.0),
                           max_position_embeddings=4 * ORIGINAL)),
    "qwen3": ("Qwen3", dict(head_dim=8, attention_bias=True, use_sliding_window=True, sliding_window=3,
                            max_window_layers=1)),
    "gemma2": ("Gemma2", dict(head_dim=8, query_pre_attn_scalar=13, attn_logit_softcapping=3.0, sliding_window=3,
                              hidden_activation="gelu_pytorch_tanh")),
    "gemma3_text": ("Gemma3Text", dict(head_dim=8, query_pre_attn_scalar=13, sliding_window=3,
                                       layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                                       rope_parameters={"sliding_attention": dict(rope_type="default", rope_theta=50.0),
                                                        "full_attention": dict(rope_type="linear", factor=2.0,
                                                                               rope_theta=500.0)})),
    "olmo2": ("Olmo2", {}),
    "smollm3": ("SmolLM3", dict(no_rope_layers=[1, 0, 1], use_sliding_window=True, sliding_window=3)),
    "phi3": ("Phi3", dict(sliding_window=5, original_max_position_embeddings=SIZES["positions"])),
    "phi3_partial": ("Phi3", dict(partial_rotary_factor=0.5)),          # Phi-4-mini's form: half turn
    "bloom": ("Bloom", dict(hidden_size=48, num_attention_heads=6)),          # 6 heads: the slopes interleave
    "falcon": ("Falcon", dict(num_kv_heads=1, multi_query=True, parallel_attn=True)),   # Falcon-7B's form
    "falcon_new": ("Falcon", dict(new_decoder_architecture=True, num_kv_heads=2, bias=True)),   # 40B's
    "falcon_alibi": ("Falcon", dict(multi_query=False, parallel_attn=False, alibi=True, bias=True)),  # RW's
}


def tokenizer(family: str) -> Tokenizer:
    """GPT-2: byte-level BPE (spaces as Ġ); the Llama family: SentencePiece-style (spaces as ▁)
    with <s> added before the text, as Llama's tokenizer does."""
    if family == "gpt2":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=290, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    else:
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
        trainer = trainers.BpeTrainer(vocab_size=120, special_tokens=["<unk>", "<s>", "</s>"])
    tok.train_from_iterator(SENTENCES, trainer)
    if family != "gpt2":
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return tok


def config(family: str, theta: float = 500.0):
    s = SIZES
    if family in MORE:
        name, switches = MORE[family]
        cls = getattr(transformers, name + "Config")
        if name in ("Bloom", "Falcon"):
            sizes = dict(hidden_size=s["d_model"], num_hidden_layers=s["layers"], num_attention_heads=s["heads"])
            if name == "Falcon":
                sizes.update(ffn_hidden_size=s["d_ff"], max_position_embeddings=s["positions"], rope_theta=theta)
        else:
            sizes = dict(hidden_size=s["d_model"], num_attention_heads=s["heads"], num_key_value_heads=s["groups"],
                         num_hidden_layers=s["layers"], intermediate_size=s["d_ff"], rms_norm_eps=1e-5,
                         max_position_embeddings=s["positions"], tie_word_embeddings=False, pad_token_id=0)
            if "rope_parameters" not in switches:
                sizes["rope_theta"] = theta
        return cls(**{**sizes, **switches}, vocab_size=s["vocab"], bos_token_id=1, eos_token_id=2)
    if family == "gpt2":
        return transformers.GPT2Config(n_embd=s["d_model"], n_head=s["heads"], n_layer=s["layers"],
                                       n_positions=s["positions"], vocab_size=s["vocab"], n_inner=s["d_ff"],
                                       bos_token_id=0, eos_token_id=0)
    cls = {"llama": transformers.LlamaConfig, "mistral": transformers.MistralConfig,
           "qwen2": transformers.Qwen2Config}[family]
    return cls(hidden_size=s["d_model"], num_attention_heads=s["heads"], num_key_value_heads=s["groups"],
               num_hidden_layers=s["layers"], intermediate_size=s["d_ff"], vocab_size=s["vocab"],
               max_position_embeddings=s["positions"], rms_norm_eps=1e-5, rope_theta=theta,
               bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)


def build(family: str, folder: Path, *, seed: int = 0, dtype=None, shard: str | None = None,
          old_rope_key: bool = False):
    """Saves a random checkpoint of `family` in `folder` and returns the float64 model."""
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config(family), attn_implementation="eager")
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1 and ("norm" in name or ".ln_" in name):      # gains around 1
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            elif p.ndim == 1:                                           # biases, not zero
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            else:
                p.mul_(20.0 if "embed" not in name and "wte" not in name and "wpe" not in name else 5.0)
    if dtype is not None:
        model = model.to(dtype)
    model.save_pretrained(folder, safe_serialization=True, **({"max_shard_size": shard} if shard else {}))
    transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer(family)).save_pretrained(folder)
    if old_rope_key:  # as older transformers (and most published checkpoints) write it
        cfg = json.loads((folder / "config.json").read_text())
        cfg.update(old_rope(cfg.pop("rope_parameters")))
        (folder / "config.json").write_text(json.dumps(cfg))
    return model.double().eval()


def old_rope(params: dict) -> dict:
    """transformers 5's rope_parameters as older versions wrote them: a top-level rope_theta and a
    rope_scaling with "type" (Gemma 3: the sliding layers' base as rope_local_base_freq)."""
    if "full_attention" in params:
        out = old_rope(params["full_attention"])
        return {**out, "rope_local_base_freq": params["sliding_attention"]["rope_theta"]}
    params = dict(params)
    out = {"rope_theta": params.pop("rope_theta")}
    kind = params.pop("rope_type", "default")
    if kind != "default":
        out["rope_scaling"] = {"type": kind, **params}
    return out


def blocks_of(model):
    return model.transformer.h if hasattr(model, "transformer") else model.model.layers


def run_model(model, ids: list[int], layer: int, attentions: bool = True) -> dict:
    """transformers' own eager forward: the stream entering `layer`, its attention weights, the
    attention module's output (caught by a hook; BLOOM's module adds the residual itself, taken
    off here) and, where the family has one, the norm of that output (caught too)."""
    caught = {}
    blk = blocks_of(model)[layer]
    attn = next(getattr(blk, a) for a in ("attn", "self_attn", "self_attention") if hasattr(blk, a))

    def catch(key: str, first: bool):
        def hook(module, args, out):   # returns None: the output goes on unchanged
            caught[key] = out[0] if first else out
        return hook
    hooks = [attn.register_forward_hook(catch("out", True))]
    if model.config.model_type in ("gemma2", "gemma3_text", "olmo2"):
        hooks.append(blk.post_attention_layernorm.register_forward_hook(catch("normed", False)))
    try:
        with torch.no_grad():
            res = model(torch.tensor([ids]), output_hidden_states=True, output_attentions=attentions)
    finally:
        for hook in hooks:
            hook.remove()
    x = res.hidden_states[layer][0].numpy()
    out = caught["out"][0].numpy() - (x if model.config.model_type == "bloom" else 0.0)
    added = caught["normed"][0].numpy() if "normed" in caught else out
    return dict(x=x, weights=res.attentions[layer][0].numpy() if attentions else None, out=out, residual=x + added)


def rotary_of(model, layer: int) -> tuple[np.ndarray | None, float]:
    """The frequencies and the cos/sin scale transformers uses at `layer` (None: no rotation)."""
    cfg = model.config
    if getattr(cfg, "alibi", False) or cfg.model_type in ("gpt2", "bloom") or \
            (getattr(cfg, "no_rope_layers", None) and not cfg.no_rope_layers[layer]):
        return None, 1.0
    rot = (model.transformer if hasattr(model, "transformer") else model.model).rotary_emb
    kind = getattr(cfg, "layer_types", None)
    if hasattr(rot, "inv_freq"):
        return rot.inv_freq.double().numpy(), float(rot.attention_scaling)
    return (getattr(rot, f"{kind[layer]}_inv_freq").double().numpy(),
            float(getattr(rot, f"{kind[layer]}_attention_scaling")))


# ---------------------------------------------------------------- an independent float64 forward
def state(model) -> dict:
    """The model's parameters as float64 NumPy arrays, names without the family's prefix."""
    return {k.split("model.", 1)[-1].split("transformer.", 1)[-1]: v.detach().double().numpy()
            for k, v in model.state_dict().items()}


def _rotary(m: np.ndarray, theta: float, freqs: np.ndarray | None = None) -> np.ndarray:
    """Rotary positions as complex numbers: the pair (i, i + d/2) is x_i + j·x_(i+d/2), turned
    by e^(j·p·f_i) at position p, f_i = theta^(−2i/d) unless the frequencies are given (fewer of
    them than pairs: partial rotary, the features past 2·len(f) stay)."""
    n, d = m.shape
    f = theta ** (-2.0 * np.arange(d // 2) / d) if freqs is None else freqs
    r = 2 * len(f)                 # fewer frequencies than pairs: only the first r features turn
    z = m[:, : r // 2] + 1j * m[:, r // 2: r]
    z = z * np.exp(1j * np.outer(np.arange(n), f))
    return np.concatenate([z.real, z.imag, m[:, r:]], axis=1)


def llama_reference(w: dict, ids: list[int], layer: int, theta: float, eps: float = 1e-5) -> dict:
    """A Llama-family forward with a loop over heads, for tight float64 comparisons."""
    H, G = SIZES["heads"], SIZES["groups"]
    x = w["embed_tokens.weight"][ids]
    n = len(ids)
    for i in range(layer + 1):
        p = f"layers.{i}."
        h = x / np.sqrt(np.mean(x ** 2, axis=1, keepdims=True) + eps) * w[p + "input_layernorm.weight"]
        lin = lambda name, a: a @ w[p + name + ".weight"].T + w.get(p + name + ".bias", 0.0)  # noqa: E731
        q, k, v = lin("self_attn.q_proj", h), lin("self_attn.k_proj", h), lin("self_attn.v_proj", h)
        d = q.shape[1] // H
        heads, z = [], []
        for head in range(H):
            g = head // (H // G)
            qh = _rotary(q[:, head * d:(head + 1) * d], theta)
            kh = _rotary(k[:, g * d:(g + 1) * d], theta)
            s = qh @ kh.T / math.sqrt(d) + np.where(np.tril(np.ones((n, n))) > 0, 0.0, -np.inf)
            a = np.exp(s - s.max(axis=1, keepdims=True))
            a = a / a.sum(axis=1, keepdims=True)
            heads.append(a)
            z.append(a @ v[:, g * d:(g + 1) * d])
        out = lin("self_attn.o_proj", np.hstack(z))
        if i == layer:
            return dict(x=x, weights=np.stack(heads), out=out, residual=x + out)
        x = x + out
        h = x / np.sqrt(np.mean(x ** 2, axis=1, keepdims=True) + eps) * w[p + "post_attention_layernorm.weight"]
        gate = lin("mlp.gate_proj", h)
        x = x + lin("mlp.down_proj", gate / (1 + np.exp(-gate)) * lin("mlp.up_proj", h))


def _rms(m: np.ndarray, gain, eps: float) -> np.ndarray:
    return m / np.sqrt(np.mean(m ** 2, axis=-1, keepdims=True) + eps) * gain


def _qk_normed(rows: list, arrays: dict, key: str) -> list:
    """QK-norm of each head's rows (scope "head"), or of all heads' rows side by side ("all")."""
    gain, eps = arrays[key], arrays["qk_norm_eps"]
    if arrays["qk_norm_scope"] == "head":
        return [_rms(m, gain[i], eps) for i, m in enumerate(rows)]
    whole = _rms(np.hstack(rows), np.concatenate(list(gain)), eps)
    return np.split(whole, len(rows), axis=1)


def attend(arrays: dict, freqs: np.ndarray | None = None, factor: float = 1.0) -> dict:
    """Every head's weights, `out` and `residual` from what layer_arrays returns, computed here
    with loops over heads (not with the loader's code), with every family's mechanisms: the
    rotation by `freqs` (transformers' own frequencies when given; cos and sin × `factor`)."""
    x, H, G = arrays["x"], len(arrays["q"]), len(arrays["k"])
    nrm, h = arrays.get("norm_in"), x
    if nrm is not None:
        c = x - x.mean(axis=1, keepdims=True) if nrm["kind"] == "layer" else x
        h = _rms(c, nrm["gain"], nrm["eps"]) + (nrm["bias"] if nrm["bias"] is not None else 0.0)
    n = x.shape[0]
    i, j = np.indices((n, n))
    mask = arrays.get("mask", "causal")
    hidden = (j > i) | ((i - j >= int(mask.split(":")[1])) if mask.startswith("sliding:") else False)
    bias = lambda key, i: 0.0 if arrays.get(key) is None else arrays[key][i]  # noqa: E731
    qs = [h @ arrays["q"][head] + bias("bq", head) for head in range(H)]
    ks = [h @ arrays["k"][g] + bias("bk", g) for g in range(G)]
    if "q_norm" in arrays:
        qs, ks = _qk_normed(qs, arrays, "q_norm"), _qk_normed(ks, arrays, "k_norm")
    if arrays["rope"] is not None:
        base = arrays["rope"]["base"]
        qs, ks = ([_rotary(m, base, freqs) * factor for m in ms] for ms in (qs, ks))
    weights, z = [], []
    for head in range(H):
        g = head // (H // G)
        s = qs[head] @ ks[g].T / arrays.get("defaults", {}).get("scale", math.sqrt(qs[head].shape[1]))
        if "softcap" in arrays:
            s = arrays["softcap"] * np.tanh(s / arrays["softcap"])
        if "alibi" in arrays:
            s = s - arrays["alibi"][head] * (i - j)
        s[hidden] = -np.inf
        a = np.exp(s - s.max(axis=1, keepdims=True))
        weights.append(a / a.sum(axis=1, keepdims=True))
        z.append(weights[-1] @ (h @ arrays["v"][g] + bias("bv", g)))
    out = np.hstack(z) @ arrays["o"] + (0.0 if arrays["bo"] is None else arrays["bo"])
    added = out if "out_norm" not in arrays else _rms(out, arrays["out_norm"]["gain"], arrays["out_norm"]["eps"])
    return dict(x=x, weights=np.stack(weights), out=out, residual=x + added)
