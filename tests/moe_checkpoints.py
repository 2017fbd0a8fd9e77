"""Tiny mixture-of-experts checkpoints (Qwen3-MoE, gpt-oss) made with transformers in float32
(its expert kernels run in float32 only), weights scaled up so heads are sharp; and gpt-oss's
experts rewritten as MXFP4 blocks and scales, quantized here from the e2m1 table of the spec."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import transformers
from safetensors.numpy import load_file, save_file

from tiny_checkpoints import tokenizer

SIZES = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=3, head_dim=16,
             vocab_size=300, max_position_embeddings=64, rms_norm_eps=1e-5, tie_word_embeddings=False,
             bos_token_id=1, eos_token_id=2, pad_token_id=0)
CONFIGS = {
    "qwen3_moe": ("Qwen3Moe", dict(num_experts=6, num_experts_per_tok=2, moe_intermediate_size=32, intermediate_size=48,
                                   norm_topk_prob=True, mlp_only_layers=[1], attention_bias=True)),
    "gpt_oss": ("GptOss", dict(num_local_experts=6, num_experts_per_tok=2, intermediate_size=32, sliding_window=3,
                               swiglu_limit=3.0)),
}


def build(family: str, folder: Path, seed: int = 0):
    """Saves a random float32 checkpoint of `family` in `folder`; returns the model (eager)."""
    name, switches = CONFIGS[family]
    torch.manual_seed(seed)
    cfg = getattr(transformers, name + "Config")(**SIZES, **switches)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for key, p in model.named_parameters():
            if p.ndim == 1 and "norm" in key:
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            elif p.ndim == 1 and "sinks" in key:
                p.copy_(2.0 * torch.randn(p.shape, generator=gen))
            elif p.ndim <= 2 and ("bias" in key or p.ndim == 1):
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            else:
                p.mul_(5.0 if "embed" in key else 8.0)
    model.save_pretrained(folder, safe_serialization=True)
    transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer("llama")).save_pretrained(folder)
    return model.eval()


# ------------------------------------------------------------ MXFP4, written from the spec
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def quantize(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A module matrix (experts × in × out) as MXFP4: per output row, blocks of 32 inputs share a
    power of two chosen so the largest fits under 6; each value rounded to the nearest e2m1 code."""
    rows = np.swapaxes(w, -1, -2)                                   # experts × out × in
    groups = rows.reshape(rows.shape[:-1] + (-1, 32))
    top = np.abs(groups).max(axis=-1)
    exponent = np.where(top > 0, np.ceil(np.log2(np.maximum(top, 1e-30) / 6.0)), 0).astype(np.int32)
    scaled = groups / np.ldexp(1.0, exponent)[..., None]
    code = np.abs(np.abs(scaled)[..., None] - E2M1).argmin(axis=-1) + 8 * (scaled < 0)
    packed = (code[..., 0::2] | (code[..., 1::2] << 4)).astype(np.uint8)
    return packed, (exponent + 127).astype(np.uint8)


def reference_dequantize(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """The spec read directly, value by value: nibble → sign, exponent, mantissa."""
    def e2m1(code: int) -> float:
        sign = -1.0 if code & 8 else 1.0
        exp, man = (code >> 1) & 3, code & 1
        return sign * (man * 0.5 if exp == 0 else (1 + man * 0.5) * 2.0 ** (exp - 1))
    out = np.zeros(blocks.shape[:-1] + (32,))
    for idx in np.ndindex(blocks.shape[:-1]):
        scale = 2.0 ** (int(scales[idx]) - 127)
        for b in range(16):
            byte = int(blocks[idx + (b,)])
            out[idx + (2 * b,)] = e2m1(byte & 15) * scale
            out[idx + (2 * b + 1,)] = e2m1(byte >> 4) * scale
    return np.swapaxes(out.reshape(blocks.shape[:-2] + (-1,)), -1, -2)


def to_mxfp4(src: Path, dst: Path) -> None:
    """A copy of the gpt-oss folder `src` whose experts' matrices are MXFP4 blocks and scales,
    with config.json's quantization_config saying so."""
    dst.mkdir(parents=True, exist_ok=True)
    tensors = load_file(src / "model.safetensors")
    out = {}
    for key, value in tensors.items():
        if key.endswith(("experts.gate_up_proj", "experts.down_proj")):
            out[key + "_blocks"], out[key + "_scales"] = quantize(value.astype(np.float64))
        else:
            out[key] = value
    save_file(out, dst / "model.safetensors", metadata={"format": "pt"})
    for f in src.iterdir():
        if f.name not in ("model.safetensors", "config.json"):
            (dst / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((src / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    (dst / "config.json").write_text(json.dumps(cfg))
