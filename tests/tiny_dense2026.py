"""Tiny random checkpoints of the dense families of 2026 (CONTRACT §17), built with transformers with
each family's mechanisms switched on and set where they matter on TEXT's tokens: Gemma 4's K = V
global layers with their own head size, keys and values shared across layers, PLE, experts and
layer scalars; Gemma 3n's AltUp streams, LAuReL and activation sparsity; Llama 4's chunks of 3,
NoPE layers warmed every 2 tokens and experts; GLM-4.5's biases, QK-norm, partial rotary and grouped
routing; OLMo 3's sliding layers with yarn on the global ones; nanochat; MiniMax-M2's rotary_dim
and experts; Mistral 4's latent attention with yarn and its query temperature, alone and inside
Mistral Small 4's multimodal wrapper (`mistral3`); Gemma 4's and Llama 4's wrappers. Weights scaled up,
gains, biases, layer scalars and correction biases randomised (a loader that dropped one would
fail). `attention_record` is transformers' own eager forward caught by hooks."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from tiny_checkpoints import tokenizer

TEXT = "the cat sat on the mat and the dog sat on the log"
SIZES = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, vocab_size=300, max_position_embeddings=64,
             tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=0)
GEMMA4_TYPES = ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "full_attention"]
MOE = dict(num_experts_per_tok=2)

CONFIGS = {
    # K = V and 1 key/value head of 16 on global layers; layers 3 and 4 read layers 2 and 1
    "gemma4_text": ("Gemma4Text", dict(num_hidden_layers=5, head_dim=8, global_head_dim=16,
                                       num_global_key_value_heads=1, attention_k_eq_v=True, num_kv_shared_layers=2,
                                       hidden_size_per_layer_input=4, vocab_size_per_layer_input=300,
                                       intermediate_size=48, sliding_window=3, use_double_wide_mlp=True,
                                       layer_types=GEMMA4_TYPES)),
    # the multimodal wrapper's text model: experts beside the MLP, no K = V, no PLE, no sharing
    "gemma4": ("Gemma4Text", dict(num_hidden_layers=3, head_dim=8, global_head_dim=16, intermediate_size=48,
                                  sliding_window=3, hidden_size_per_layer_input=0, enable_moe_block=True, num_experts=4,
                                  top_k_experts=2, moe_intermediate_size=12,
                                  layer_types=["sliding_attention", "full_attention", "full_attention"])),
    "gemma3n_text": ("Gemma3nText", dict(num_hidden_layers=4, head_dim=8, num_kv_shared_layers=2,
                                         hidden_size_per_layer_input=4, vocab_size_per_layer_input=300,
                                         intermediate_size=48, sliding_window=3, laurel_rank=5, altup_num_inputs=3,
                                         activation_sparsity_pattern=[0.95, 0.5, 0.0, 0.0],
                                         layer_types=["sliding_attention", "full_attention"] * 2)),
    "llama4_text": ("Llama4Text", dict(num_hidden_layers=4, head_dim=8, intermediate_size=16, intermediate_size_mlp=48,
                                       num_local_experts=4, interleave_moe_layer_step=2, attention_chunk_size=3,
                                       no_rope_layer_interval=2, floor_scale=2, attn_scale=0.5, **MOE)),
    "glm4_moe": ("Glm4Moe", dict(num_hidden_layers=3, head_dim=8, intermediate_size=48, moe_intermediate_size=12,
                                 n_routed_experts=4, first_k_dense_replace=1, use_qk_norm=True, attention_bias=True,
                                 n_group=2, topk_group=1, routed_scaling_factor=1.5, **MOE)),
    "olmo3": ("Olmo3", dict(num_hidden_layers=4, intermediate_size=48, sliding_window=3,
                            rope_parameters={"sliding_attention": dict(rope_type="default", rope_theta=1e4),
                                             "full_attention": dict(rope_type="yarn", factor=4.0, rope_theta=5e5,
                                                                    original_max_position_embeddings=8)})),
    "nanochat": ("NanoChat", dict(num_hidden_layers=3, intermediate_size=48)),
    "minimax_m2": ("MiniMaxM2", dict(num_hidden_layers=3, head_dim=8, intermediate_size=12, num_local_experts=4,
                                     rotary_dim=4, **MOE)),
    "mistral4": ("Mistral4", dict(num_hidden_layers=2, num_key_value_heads=4, intermediate_size=48,
                                  moe_intermediate_size=12, n_routed_experts=4, kv_lora_rank=8, q_lora_rank=12,
                                  qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=6, first_k_dense_replace=1,
                                  n_group=2, topk_group=1, **MOE,
                                  rope_parameters=dict(rope_type="yarn", rope_theta=1e4, factor=4.0, mscale=1.0,
                                                       mscale_all_dim=1.0, original_max_position_embeddings=4,
                                                       llama_4_scaling_beta=0.5, beta_fast=32.0, beta_slow=1.0))),
}
CONFIGS["mistral3"] = CONFIGS["mistral4"]   # Mistral Small 4's form: mistral4 inside a mistral3 wrapper
CONFIGS["llama4"] = CONFIGS["llama4_text"]   # Llama 4's multimodal checkpoint around its text model


def config(family: str):
    name, switches = CONFIGS[family]
    text = getattr(transformers, name + "Config")(**{**SIZES, **switches})
    if family == "gemma4":
        return transformers.Gemma4Config(text_config=text.to_dict(), vision_config=None, audio_config=None)
    if family == "mistral3":
        vision = transformers.PixtralVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                                  num_attention_heads=2, head_dim=8, image_size=32, patch_size=16)
        return transformers.Mistral3Config(text_config=text.to_dict(), vision_config=vision.to_dict(),
                                           image_token_index=SIZES["vocab_size"] - 1)
    if family == "llama4":
        vision = transformers.Llama4VisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                                 num_attention_heads=2, image_size=32, patch_size=16,
                                                 vision_output_dim=16, projector_input_dim=16, projector_output_dim=32,
                                                 pixel_shuffle_ratio=0.5)
        return transformers.Llama4Config(text_config=text.to_dict(), vision_config=vision.to_dict(),
                                         image_token_index=SIZES["vocab_size"] - 1)
    return text


def _model(family: str, cfg):
    kwargs = dict(attn_implementation="eager", experts_implementation="eager")
    if family == "mistral4":      # no auto mapping to its causal LM: the class itself
        return transformers.Mistral4ForCausalLM._from_config(cfg, **kwargs)
    if family in ("gemma4", "mistral3", "llama4"):
        wrapper = {"gemma4": "Gemma4", "mistral3": "Mistral3", "llama4": "Llama4"}[family] + "ForConditionalGeneration"
        return getattr(transformers, wrapper)._from_config(cfg, **kwargs)
    return transformers.AutoModelForCausalLM.from_config(cfg, **kwargs)


def build(family: str, folder: Path, seed: int = 0, scale: float | None = None):
    """Saves a random checkpoint of `family` in `folder` (config.json, model.safetensors and a
    tokenizer) and returns it as a float64 eval-mode model. 2-D weights are scaled by `scale`
    (6 for Gemma, whose scores are not divided by √d_k; 10 for the others)."""
    scale = (6.0 if family.startswith("gemma") else 10.0) if scale is None else scale
    torch.manual_seed(seed)
    model = _model(family, config(family))
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1 and ("q_norm" in name or "k_norm" in name) and not family.startswith("gemma"):
                p.copy_(1.5 + 2.0 * torch.rand(p.shape, generator=gen))   # QK-norm bounds the scores: large
                #                                                           gains for sharp heads (not Gemma's:
                #                                                           without ÷√d_k, 1 is sharp already)
            elif p.ndim == 1 and ("norm" in name or "scale" in name):   # other gains and scales around 1
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            elif p.ndim == 1:                                          # biases, not zero
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            elif "embed" in name:
                p.mul_(3.0)
            else:
                p.mul_(scale)
        for name, b in model.named_buffers():
            if name.endswith("layer_scalar"):
                b.copy_(0.6 + 0.8 * torch.rand(b.shape, generator=gen))
            elif name.endswith("e_score_correction_bias"):
                b.copy_(0.1 * torch.randn(b.shape, generator=gen))
    model.save_pretrained(folder, safe_serialization=True)
    transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer("llama")).save_pretrained(folder)
    return model.double().eval()


def config_json(folder: Path) -> dict:
    return json.loads((Path(folder) / "config.json").read_text())


def ids_of(folder: Path, text: str = TEXT) -> list[int]:
    tok = transformers.PreTrainedTokenizerFast.from_pretrained(folder)
    return tok(text)["input_ids"]


def decoder_layers(model):
    """The text model's decoder layers, wherever a multimodal wrapper keeps them."""
    return next(m for name, m in model.named_modules()
                if name.endswith("layers") and "vision" not in name and hasattr(m[0], "self_attn"))


def attention_record(model, ids: list[int]) -> list[dict]:
    """transformers' eager forward, caught at every layer: x (what the decoder layer receives:
    Gemma 3n's streams × n × d), h (what its attention reads), weights (heads × n × n) and out
    (the attention module's output after W_O), float64 NumPy."""
    records = []

    def before_layer(module, args, kwargs):
        records.append({"x": (args[0] if args else kwargs["hidden_states"])[..., 0, :, :].detach().numpy()})

    def before_attention(module, args, kwargs):
        records[-1]["h"] = (args[0] if args else kwargs["hidden_states"])[0].detach().numpy()

    def after_attention(module, args, kwargs, out):
        records[-1].update(out=out[0][0].detach().numpy(), weights=out[1][0].detach().numpy())
    hooks = []
    for layer in decoder_layers(model):
        hooks.append(layer.register_forward_pre_hook(before_layer, with_kwargs=True))
        hooks.append(layer.self_attn.register_forward_pre_hook(before_attention, with_kwargs=True))
        hooks.append(layer.self_attn.register_forward_hook(after_attention, with_kwargs=True))
    # transformers 5.24's Llama4ForConditionalGeneration fails on text alone (it reads image_outputs
    # off an output that has none): its text model is run instead, the same layers
    run = model.language_model if type(model).__name__ == "Llama4ForConditionalGeneration" else model
    try:
        with torch.no_grad():
            run(input_ids=torch.tensor([ids]), use_cache=False)
    finally:
        for hook in hooks:
            hook.remove()
    return records


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """tiny(family) → (folder, config.json, token ids, transformers' record of every layer), each
    family built the first time a test of the session asks for it (import this fixture by name)."""
    made = {}

    def get(family: str):
        if family not in made:
            folder = tmp_path_factory.mktemp(family)
            model = build(family, folder)
            ids = ids_of(folder)
            made[family] = folder, config_json(folder), ids, attention_record(model, ids)
        return made[family]
    return get
