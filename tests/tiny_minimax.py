"""A tiny random MiniMax checkpoint (`model_type` "minimax") made with transformers: lightning layers
(the decay rule) at layers 0 and 2, softmax layers at 1 and 3, a mixture of experts in every block,
residual factors away from 1, a block size of 4 so that transformers' chunked lightning attention
crosses blocks. Float64 (built under float64's default dtype, so that the slopes are float64 too);
transformers still computes its RMS norms, router, rotary tables and softmax in float32 inside, so a
stream through several layers equals it to about 1e-6, not 1e-9. `run_model` is its eager forward
with every step of interest caught."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import transformers

from tiny_checkpoints import tokenizer

LAYER_TYPES = ["linear_attention", "full_attention", "linear_attention", "full_attention"]
CONFIG = dict(hidden_size=32, num_hidden_layers=4, vocab_size=300, intermediate_size=20, num_attention_heads=4,
              num_key_value_heads=2, head_dim=8, num_local_experts=4, num_experts_per_tok=2, layer_types=LAYER_TYPES,
              block_size=4, rms_norm_eps=1e-5, rope_parameters=dict(rope_type="default", rope_theta=100.0),
              full_attn_alpha_factor=0.5, full_attn_beta_factor=1.5, linear_attn_alpha_factor=0.7,
              linear_attn_beta_factor=1.2, mlp_alpha_factor=0.9, mlp_beta_factor=1.1,
              pad_token_id=0, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)


def build(folder: Path, seed: int = 0):
    """Saves the checkpoint and a tokenizer in `folder`; returns the model (eager, eval, float64).
    Matrices ×4 (embeddings ×2) so that the lightning heads' SiLU and the router are not near-linear
    and near-uniform; gains in (0.5, 1.5)."""
    torch.manual_seed(seed)
    cfg = transformers.MiniMaxConfig(**CONFIG)
    cfg._attn_implementation, cfg._experts_implementation = "eager", "eager"
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        model = transformers.MiniMaxForCausalLM(cfg)
    finally:
        torch.set_default_dtype(default)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.copy_(0.5 + torch.rand(p.shape, generator=gen, dtype=p.dtype))
            else:
                p.mul_(2.0 if "embed" in name else 4.0)
    model.save_pretrained(folder, safe_serialization=True)
    transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer("llama")).save_pretrained(folder)
    return model.eval()


def run_model(model, ids: list[int]) -> list[dict]:
    """Per layer: x (the stream entering it), h (its mixer's input, as transformers normed it), out
    (the mixer's output); a lightning layer's act (SiLU(h·W_QKV), n × 3·heads·d) and o (every head's
    output before the norm, n × heads·d); a softmax layer's weights (heads × n × n)."""
    caught, hooks = {}, []
    for i, layer in enumerate(model.model.layers):
        mix = layer.self_attn
        hooks.append(mix.register_forward_hook(lambda m, a, kw, out, i=i: caught.update(
            {("h", i): kw["hidden_states"][0], ("out", i): out[0][0], ("second", i): out[1]}), with_kwargs=True))
        if hasattr(mix, "norm"):   # a lightning layer
            hooks.append(mix.act_fn.register_forward_hook(lambda m, a, out, i=i: caught.__setitem__(("act", i), out[0])))
            hooks.append(mix.norm.register_forward_pre_hook(lambda m, a, i=i: caught.__setitem__(("o", i), a[0][0])))
    try:
        with torch.no_grad():
            res = model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    finally:
        for hook in hooks:
            hook.remove()
    out = []
    for i in range(len(model.model.layers)):
        got = {key: caught[(key, i)].numpy() for key in ("h", "out", "act", "o") if (key, i) in caught}
        got["x"] = res.hidden_states[i][0].numpy()
        if "o" not in got:
            got["weights"] = caught[("second", i)][0].numpy()
        out.append(got)
    return out


def close(got, want, tol=5e-6):
    """Equal to within `tol` relative to the array's scale (1e-6: what transformers' float32 norms,
    router, rotary and softmax leave of float64)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    scale = max(float(np.abs(want).max()), 1.0)
    assert float(np.abs(got - want).max()) <= tol * scale, float(np.abs(got - want).max()) / scale
