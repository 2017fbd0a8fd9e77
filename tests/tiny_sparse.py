"""Tiny checkpoints of the families whose attention chooses its keys (DeepSeek V3.2 and GLM-5's
lightning indexer, DeepSeek V4's compressed and sparse layers), made with transformers in float64
(eager attention, eager experts), every mechanism switched on and away from its defaults; and
transformers' own forward of them with every intermediate a test compares caught by hooks."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import transformers

from tiny_checkpoints import tokenizer

TEXT = "the cat sat on the mat and the dog sat on the log; a bird flew over the river bank to the old mill"
COMMON = dict(vocab_size=128, hidden_size=32, num_attention_heads=4, q_lora_rank=10, n_routed_experts=4,
              n_shared_experts=1, num_experts_per_tok=2, moe_intermediate_size=12, max_position_embeddings=64,
              rms_norm_eps=1e-6, index_n_heads=8, index_head_dim=8, bos_token_id=1, eos_token_id=2,
              tie_word_embeddings=False)
LATENT = dict(num_hidden_layers=3, num_key_value_heads=4, intermediate_size=40, kv_lora_rank=6, qk_rope_head_dim=4,
              qk_nope_head_dim=6, v_head_dim=5, first_k_dense_replace=1, n_group=2, topk_group=1, index_topk=5)
CONFIGS = {
    # yarn with both mscales: the attention factor turns the indexer's rotary part as well
    "deepseek_v32": ("DeepseekV32", dict(**LATENT, routed_scaling_factor=2.5, rope_parameters=dict(
        rope_type="yarn", factor=4.0, rope_theta=500.0, mscale=0.7, mscale_all_dim=1.0,
        original_max_position_embeddings=16, beta_fast=8.0, beta_slow=0.5))),
    # the middle layer reuses the first layer's choice (no indexer of its own)
    "glm_moe_dsa": ("GlmMoeDsa", dict(**LATENT, indexer_types=["full", "shared", "full"],
                                      rope_parameters=dict(rope_type="default", rope_theta=500.0))),
    # one layer of each kind; m = 4 as published for the sparse kind, 8 (not 128) for the heavy one
    # so that a short text has entries; yarn on the compressed layers' rotary as published
    "deepseek_v4": ("DeepseekV4", dict(
        num_hidden_layers=3, num_key_value_heads=1, head_dim=16, partial_rotary_factor=0.25, sliding_window=4,
        layer_types=["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"],
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
        mlp_layer_types=["hash_moe", "moe", "moe"], o_groups=2, o_lora_rank=6, index_topk=2, hc_mult=3,
        rope_theta=50.0, compress_rope_theta=700.0, swiglu_limit=4.0,
        rope_parameters=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=16, beta_fast=8.0,
                             beta_slow=0.5))),
}


def config(family: str):
    name, switches = CONFIGS[family]
    return getattr(transformers, name + "Config")(**COMMON, **switches)


def build(family: str, folder: Path, seed: int = 0):
    """Saves a random checkpoint of `family` in `folder` (with a tokenizer); returns the float64
    model. 2-D weights ×6 so that heads and index scores are sharp; norm gains around 1; sinks,
    pooling biases, hyper-connection biases and scales, router biases drawn away from their zero
    initial values (a reader that dropped one would still pass otherwise)."""
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config(family), attn_implementation="eager",
                                                          experts_implementation="eager")
    gen = torch.Generator().manual_seed(seed + 1)
    draw = lambda p, s: torch.randn(p.shape, generator=gen, dtype=p.dtype) * s  # noqa: E731
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1 and "norm" in name and name.endswith("weight"):
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            elif "sinks" in name or "position_bias" in name or name.endswith(".base"):
                p.copy_(draw(p, 1.0))
            elif name.endswith("scale"):     # the hyper-connections' three scales
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            elif p.ndim == 1:
                p.copy_(draw(p, 0.5))
            elif "hc_" in name or name.endswith(".fn"):
                p.mul_(10.0)
            elif "gate_up_proj" in name or "down_proj" in name and p.ndim == 3:
                p.mul_(6.0)
            elif p.ndim == 2:
                p.mul_(6.0 if "embed" not in name else 1.0)
        for name, b in model.named_buffers():
            if "e_score_correction_bias" in name:
                b.copy_(draw(b, 0.3))
            elif name.endswith("tid2eid"):   # each token's experts: distinct, as a hash table holds them
                b.copy_(torch.stack([torch.randperm(COMMON["n_routed_experts"], generator=gen)[: b.shape[1]]
                                     for _ in range(b.shape[0])]))
    model.save_pretrained(folder, safe_serialization=True)
    transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer("llama")).save_pretrained(folder)
    return model.double().eval()


def close(got, want, what, tol=2e-6):
    """Within the float32 of transformers' norms, rotary tables and indexer (its model is float64)."""
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    err = np.abs(got - want).max() / max(1.0, np.abs(want).max())
    assert err < tol, f"{what}: relative error {err:.2e}"


def ids_of(folder: Path, text: str = TEXT) -> list[int]:
    return transformers.AutoTokenizer.from_pretrained(folder)(text)["input_ids"]


def _hook(caught: dict, key, part=None, inputs=False):
    def hook(module, args, out):
        value = args if inputs else out
        caught[key] = value if part is None else value[part]
    return hook


def _taps(model) -> tuple[dict, list]:
    """Hooks on every layer's attention, its indexer and compressor: what each computed."""
    caught, hooks = {}, []
    v4 = model.config.model_type == "deepseek_v4"
    for i, layer in enumerate(model.model.layers):
        a = layer.self_attn
        hooks.append(a.register_forward_pre_hook(lambda m, args, kw, i=i: caught.__setitem__(
            ("attn_in", i), (args[0] if args else kw["hidden_states"])), with_kwargs=True))
        hooks.append(a.register_forward_hook(_hook(caught, ("out", i), 0)))
        if v4:
            hooks.append(layer.attn_hc.register_forward_hook(_hook(caught, ("collapsed", i), 2)))
            c = a.compressor
            if c is not None:   # the compressed entries: batch × 1 × entry × width
                hooks.append(c.register_forward_hook(lambda m, args, out, i=i: caught.__setitem__(
                    ("entries", i), out[0][:, 0])))
            if c is not None and hasattr(c, "indexer"):
                hooks.append(c.indexer.register_forward_hook(_hook(caught, ("chosen", i))))
                hooks.append(c.indexer.scorer.register_forward_hook(_hook(caught, ("index_in", i), inputs=True)))
                hooks.append(c.indexer.scorer.register_forward_hook(_hook(caught, ("index_scores", i))))
        else:   # GLM's attention returns the choice it used (its own or the one it shares)
            hooks.append(a.register_forward_hook(lambda m, args, out, i=i: caught.__setitem__(
                ("chosen", i), out[2]) if len(out) > 2 else None))
        if not v4 and a.indexer is not None:
            x = a.indexer
            hooks.append(x.register_forward_hook(_hook(caught, ("chosen", i))))
            for key, mod in (("index_q", x.wq_b), ("index_k", x.k_norm), ("index_w", x.weights_proj)):
                hooks.append(mod.register_forward_hook(_hook(caught, (key, i))))
    return caught, hooks


def run(model, ids: list[int]) -> list[dict]:
    """transformers' eager forward, no cache; per layer: `x` (the residual entering; DeepSeek V4:
    its streams, token × stream × width), `collapsed` (V4: the streams mixed into one), `attn_in`
    (what the attention module reads: the normed stream), `weights` (heads × query × key), `out`
    (the attention's output), `chosen` (each query's kept keys, a set; V4's: entries) and, where
    the indexer exposes them, `index_*` (its q, k and w before rotation; V4: its scores)."""
    caught, hooks = _taps(model)
    try:
        with torch.no_grad():
            res = model(torch.tensor([ids]), output_hidden_states=True, output_attentions=True, use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    layers = []
    for i in range(model.config.num_hidden_layers):
        got = dict(x=res.hidden_states[i][0].numpy(), weights=res.attentions[i][0].numpy())
        for (key, at), value in caught.items():
            if at == i:
                got[key] = value if key == "index_in" else value[0].numpy()
        if "chosen" in got:
            got["chosen"] = [set(int(j) for j in row if j >= 0) for row in got["chosen"]]
        if "index_in" in got:
            got["index_q"], got["index_k"] = (t[0].numpy() for t in got.pop("index_in")[:2])
        layers.append(got)
    return layers
