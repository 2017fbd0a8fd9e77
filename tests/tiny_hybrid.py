"""Tiny random checkpoints of the hybrid families (linear attention beside softmax layers) made with
transformers, every layer kind present: Qwen3-Next (grouped linear heads, gated attention with
biases and partial rotary, experts and a dense layer), Qwen3.5 (text, and inside the multimodal
checkpoint), OLMo-Hybrid (β up to 2; rotary or NoPE), Kimi Linear (KDA, latent attention without
positions, grouped sigmoid routing). Float32 (the hybrid models' recurrences and experts run in it on
CPU); weights scaled so heads are sharp, decays and β spread over their range, gains and biases
random. `run_model` is transformers' own eager forward with every step of interest caught."""
from __future__ import annotations

import contextlib
import importlib
from pathlib import Path

import numpy as np
import torch
import transformers

from tiny_checkpoints import tokenizer

COMMON = dict(hidden_size=32, num_hidden_layers=4, vocab_size=300, intermediate_size=40, rms_norm_eps=1e-6,
              pad_token_id=0, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
LINEAR = dict(linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=6,
              linear_conv_kernel_dim=3)
ALTERNATING = ["linear_attention", "full_attention", "linear_attention", "full_attention"]
QWEN_ATTENTION = dict(num_attention_heads=4, num_key_value_heads=2, head_dim=8)
FAMILIES = {
    "qwen3_next": ("Qwen3Next", dict(**QWEN_ATTENTION, **LINEAR, layer_types=ALTERNATING, attention_bias=True,
                                     rope_parameters=dict(rope_type="default", rope_theta=100.0,
                                                          partial_rotary_factor=0.5),
                                     num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                                     shared_expert_intermediate_size=12, mlp_only_layers=[2])),
    "qwen3_5_text": ("Qwen3_5Text", dict(**QWEN_ATTENTION, **LINEAR, rope_parameters=dict(
        rope_type="default", rope_theta=100.0, partial_rotary_factor=0.5, mrope_section=[2, 1, 1],
        mrope_interleaved=True))),
    "olmo_hybrid": ("OlmoHybrid", dict(num_attention_heads=4, num_key_value_heads=2, **LINEAR, layer_types=ALTERNATING,
                                       rope_parameters=dict(rope_type="default", rope_theta=100.0))),
    "olmo_hybrid_nope": ("OlmoHybrid", dict(num_attention_heads=4, num_key_value_heads=2, **LINEAR,
                                            layer_types=ALTERNATING, linear_allow_neg_eigval=False,
                                            rope_parameters=dict(rope_type="default", rope_theta=None))),
    "kimi_linear": ("KimiLinear", dict(num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=8, q_lora_rank=None,
                                       qk_rope_head_dim=4, qk_nope_head_dim=6, v_head_dim=6,
                                       linear_attn_config=dict(num_heads=2, head_dim=8, short_conv_kernel_size=3,
                                                               full_attn_layers=[2, 4], kda_layers=[1, 3]),
                                       num_local_experts=4, num_experts_per_token=2, moe_intermediate_size=16,
                                       n_group=2, topk_group=1, first_k_dense_replace=1, routed_scaling_factor=2.5,
                                       rms_norm_eps=1e-5)),   # its latent norms keep 1e-6: both matter
}
FAMILIES["kimi_linear_q_rank"] = ("KimiLinear", {**FAMILIES["kimi_linear"][1], "q_lora_rank": 6})   # compressed queries
CHUNK_FUNCTIONS = {"qwen3_next": "torch_chunk_gated_delta_rule", "qwen3_5": "torch_chunk_gated_delta_rule",
                   "olmo_hybrid": "torch_chunk_gated_delta_rule", "kimi_linear": "chunk_kimi_delta_attention"}


def config(family: str):
    name, switches = FAMILIES[family]
    return getattr(transformers, name + "Config")(**{**COMMON, **switches})


def _scaled(model, seed: int) -> None:
    """Sharp heads and spread gates: matrices ×20 (embeddings ×5, conv kernels N(0, 0.5), latent
    projections ×0.1), decays
    A = e^A_log in (0.05, 1), dt_bias and biases random, gains around 1 (zero-centred ones around 0)."""
    gen = torch.Generator().manual_seed(seed)
    rand = lambda p: torch.rand(p.shape, generator=gen)  # noqa: E731
    zero_centred = model.config.model_type.startswith("qwen3")
    with torch.no_grad():
        learned = [(n, b) for n, b in model.named_buffers() if n.endswith("e_score_correction_bias")]
        for name, p in list(model.named_parameters()) + learned:    # not the rotary tables (buffers)
            if name.endswith("A_log"):
                p.copy_(torch.log(0.05 + 0.95 * rand(p)))
            elif "conv1d" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            elif p.ndim == 1 and "norm" in name:
                gated = "linear_attn.norm" in name    # the gated norm's gain is used as stored
                p.copy_(rand(p) - 0.5 if zero_centred and not gated else 0.5 + rand(p))
            elif p.ndim == 1 and p.is_floating_point():    # dt_bias, biases, the routers' correction
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            elif name.split(".")[-2] in ("kv_a_proj_with_mqa", "q_a_proj"):
                p.mul_(0.1)     # Kimi's latents small, so that their norms' eps (1e-6) counts
            elif p.is_floating_point() and p.ndim >= 2:
                p.mul_(5.0 if "embed" in name else 20.0)


def build(family: str, folder: Path, seed: int = 0):
    """Saves a float32 checkpoint of `family` (or `qwen3_5`: the multimodal checkpoint around a
    Qwen3.5 text model) in `folder`, with a tokenizer; returns the model (eager, eval)."""
    torch.manual_seed(seed)
    if family == "qwen3_5":
        text = config("qwen3_5_text").to_dict()
        cfg = transformers.Qwen3_5Config(text_config=text, vision_config=dict(
            depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=32, patch_size=2,
            temporal_patch_size=1))
        model = transformers.Qwen3_5ForConditionalGeneration(cfg)
    else:
        model = transformers.AutoModelForCausalLM.from_config(config(family), attn_implementation="eager")
    model.config._attn_implementation = "eager"
    _scaled(model, seed + 1)
    model.save_pretrained(folder, safe_serialization=True)
    transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer("llama")).save_pretrained(folder)
    return model.eval()


def decoder_layers(model):
    inner = model.model
    return inner.language_model.layers if hasattr(inner, "language_model") else inner.layers


@contextlib.contextmanager
def caught_rule(model):
    """The linear layers' calls of transformers' chunked recurrence, in order: its inputs (query, key,
    value after the convolution, log-decay g, β) and its output o."""
    module = importlib.import_module(type(decoder_layers(model)[0]).__module__)
    name = CHUNK_FUNCTIONS[module.__name__.rsplit(".", 2)[-2]]
    real, calls = getattr(module, name), []

    def spy(query, key, value, g, beta, **kwargs):
        out = real(query, key, value, g=g, beta=beta, **kwargs)
        calls.append(dict(q=query, k=key, v=value, g=g, beta=beta, o=out[0]))
        return out
    setattr(module, name, spy)
    try:
        yield calls
    finally:
        setattr(module, name, real)


def run_model(model, ids: list[int]) -> list[dict]:
    """transformers' eager forward, per layer: x (the stream entering it), out (its mixer's output),
    and weights (softmax layers) or, for linear layers, q, k, v, decay α, β, o (per value head),
    z (the gated norm's output) as transformers computed them."""
    layers, caught = decoder_layers(model), {}
    hooks = []
    for i, layer in enumerate(layers):
        mix = getattr(layer, "linear_attn", None) or layer.self_attn
        hooks.append(mix.register_forward_hook(lambda m, a, out, i=i: caught.__setitem__(
            ("out", i), out[0] if isinstance(out, tuple) else out)))
        gated = getattr(mix, "norm", None) or getattr(mix, "o_norm", None)
        if gated is not None:
            hooks.append(gated.register_forward_hook(lambda m, a, out, i=i: caught.__setitem__(("z", i), out)))
    try:
        with torch.no_grad(), caught_rule(model) as calls:
            res = model(input_ids=torch.tensor([ids]), output_hidden_states=True, output_attentions=True)
    finally:
        for hook in hooks:
            hook.remove()
    return _per_layer(model, res, caught, calls, len(ids))


def _per_layer(model, res, caught: dict, calls: list, n: int) -> list[dict]:
    out, calls, attentions = [], iter(calls), iter(res.attentions)
    hidden = res.hidden_states
    for i, layer in enumerate(decoder_layers(model)):
        got = dict(x=hidden[i][0].numpy(), out=caught[("out", i)][0].numpy())
        if ("z", i) in caught:      # a linear layer
            c = next(calls)
            heads = c["v"].shape[2]
            per_value = lambda m: np.repeat(m[0].numpy().transpose(1, 0, 2), heads // m.shape[2], axis=0)  # noqa: E731
            g = c["g"][0].numpy()
            got.update(q=per_value(c["q"]), k=per_value(c["k"]), v=c["v"][0].numpy().transpose(1, 0, 2),
                       decay=np.exp(g.transpose(1, 0, 2) if g.ndim == 3 else g.T[:, :, None]),
                       beta=c["beta"][0].numpy().T, o=c["o"][0].numpy().transpose(1, 0, 2),
                       z=caught[("z", i)].reshape(n, heads, -1).numpy().transpose(1, 0, 2))
        else:
            got["weights"] = next(attentions)[0].numpy()
        out.append(got)
    return out


def close(got, want, tol=5e-5):
    """Equal to float32's precision, relative to the array's scale."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    scale = max(float(np.abs(want).max()), 1.0)
    assert float(np.abs(got - want).max()) <= tol * scale, float(np.abs(got - want).max()) / scale
