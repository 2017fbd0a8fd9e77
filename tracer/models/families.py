"""The families attnsim reads, each a declaration: what config.json calls its sizes, what its
tensors are called, where its norms sit and what form they take, how q, k and v are stored, and
which mechanisms its attention adds. The code that reads and runs a block knows none of them."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from .deepseek_experts import DEEPSEEK
from .experts import GPT_OSS, QWEN3_MOE, Experts

LLAMA_KEYS = dict(d_model=("hidden_size",), heads=("num_attention_heads",), layers=("num_hidden_layers",),
                  groups=("num_key_value_heads",), head_dim=("head_dim",), inner=("intermediate_size",),
                  positions=("max_position_embeddings",), eps=("rms_norm_eps",), activation=("hidden_act",))
# config.json's names → ops.activate's: the tanh GELU is written three ways, two of them with √(2/π) rounded
ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_new": "gelu_tanh",
               "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_fast", "gelu_bloom": "gelu_bloom", "relu2": "relu2"}


@dataclass(frozen=True)
class Family:
    """One model_type. Names are relative to the checkpoint's prefix (`model.`, `transformer.`…);
    a block's are relative to `{blocks}.{i}.`. Norm names may be None: no norm in that place."""
    keys: dict = field(default_factory=lambda: LLAMA_KEYS)   # size → config keys, first present wins
    activation: str = "silu"            # when config.json names none
    embed: str = "embed_tokens"
    positions_table: str | None = None  # learned positions (GPT-2's wpe)
    embed_norm: str | None = None       # a norm right after the embeddings (BLOOM)
    embed_scale: bool = False           # embeddings × √d_model (Gemma)
    blocks: str = "layers"
    norm: str = "rms"                   # "rms" or "layer" (LayerNorm, with a bias)
    gain_offset: float = 0.0            # added to every stored norm gain (Gemma stores gain − 1)
    attn_in: str | None = "input_layernorm"
    attn_out: str | None = None         # a norm of the attention's output, before the residual
    mlp_in: str | None = "post_attention_layernorm"
    mlp_out: str | None = None          # a norm of the MLP's output, before the residual
    parallel: bool = False              # attention and MLP side by side on the same x (Falcon)
    attention: str = "self_attn"
    q: str = "q_proj"                   # with k and v: separate projections, or...
    k: str = "k_proj"
    v: str = "v_proj"
    qkv: str | None = None              # ... one fused tensor, stacked as `fused` says
    fused: str = "blocks"               # "blocks": every q, then every k, then every v (Phi-3, GPT-2,
    #                                     Falcon's multi-query); "heads": q, k, v per head (BLOOM);
    #                                     "groups": per group its queries, then k, then v (Falcon's new)
    o: str = "o_proj"
    conv1d: bool = False                # weights stored (in, out) rather than nn.Linear's (out, in)
    mlp: tuple = ("gate_proj", "up_proj", "down_proj")   # gated: down(act(gate)·up); plain: (up, down)
    gate_up: str | None = None          # gate and up fused, gate first (Phi-3)
    biases: str = "saved"               # "saved": those present; "all": every projection has one
    qk_norm: str | None = None          # "head": RMS of each head's q and k; "all": over the whole width
    groups: str = "key"                 # key/value heads: "key" (keys["groups"], else one per query
    #                                     head), "one" (multi-query) or "all" (one per query head)
    position: str = "rotary"            # "rotary", "learned" (a table), "alibi" (added to the scaled
    #                                     scores, BLOOM) or "alibi_unscaled" (added before ÷√d_k, Falcon)
    default_base: float = 10000.0       # the rotary base when config.json gives none
    local_base: str | None = None       # config key: sliding layers' own rotary base (Gemma 3)
    nope: str | None = None             # config key: which layers rotate (SmolLM3; 0 = no positions)
    softcap: str | None = None          # config key: the cap C of C·tanh(score / C) (Gemma 2)
    scale: str | None = None            # config key: s, the scores divided by √s rather than √d_k (Gemma)
    sliding: str = "none"               # which layers slide when config.json has no layer_types: "none",
    #                                     "all" (when sliding_window is set), "from" (layers from
    #                                     max_window_layers on, when use_sliding_window), "pattern" (all
    #                                     but every p-th), "nope" (the NoPE layers, when use_sliding_window)
    pattern: int = 0                    # p, when config.json's sliding_window_pattern does not say
    latent: bool = False                # multi-head latent attention (deepseek.py)
    experts: Experts | None = None      # a mixture of experts in the MLP, declared: its config keys,
    #                                     router, tensors and expert (experts.py, deepseek_experts.py)
    sinks: bool = False                 # a learned sink logit per head joins each softmax (gpt-oss)
    v_norm: bool = False                # a gainless RMS norm of each token's value (Gemma 4)
    indexer: str | None = None          # a lightning indexer's rotary pairs, "half" or "interleaved" (its
    #                                     blocks: dsa_block.py; mechanisms/indexer)

    def block(self, i: int) -> str:
        return f"{self.blocks}.{i}."

    def gated(self) -> bool:
        return len(self.mlp) == 3 or self.gate_up is not None


LLAMA = Family()
GEMMA = Family(keys={**LLAMA_KEYS, "activation": ("hidden_activation", "hidden_act")}, activation="gelu_pytorch_tanh",
               embed_scale=True, gain_offset=1.0, attn_out="post_attention_layernorm",
               mlp_in="pre_feedforward_layernorm", mlp_out="post_feedforward_layernorm",
               scale="query_pre_attn_scalar", softcap="attn_logit_softcapping", sliding="pattern", pattern=2)
BLOOM_KEYS = dict(d_model=("hidden_size", "n_embed"), heads=("n_head", "num_attention_heads"),
                  layers=("n_layer", "num_hidden_layers"), eps=("layer_norm_epsilon",))
OLD_BLOCK = dict(embed="word_embeddings", blocks="h", norm="layer", attention="self_attention",
                 qkv="query_key_value", o="dense", mlp=("dense_h_to_4h", "dense_4h_to_h"))

LATENT = replace(LLAMA, keys={**LLAMA_KEYS, "head_dim": ("qk_rope_head_dim",)}, latent=True, experts=DEEPSEEK)

FAMILIES: dict[str, Family] = {
    "gpt2": Family(keys=dict(d_model=("n_embd",), heads=("n_head",), layers=("n_layer",), inner=("n_inner",),
                             positions=("n_positions", "n_ctx"), eps=("layer_norm_epsilon",),
                             activation=("activation_function",)),
                   activation="gelu_new", embed="wte", positions_table="wpe", blocks="h", norm="layer",
                   attn_in="ln_1", mlp_in="ln_2", attention="attn", qkv="c_attn", o="c_proj", conv1d=True,
                   mlp=("c_fc", "c_proj"), biases="all", position="learned"),
    "llama": LLAMA,
    "mistral": replace(LLAMA, sliding="all"),
    "qwen2": replace(LLAMA, sliding="from"),
    "qwen3": replace(LLAMA, qk_norm="head", sliding="from"),
    "qwen3_moe": replace(LLAMA, qk_norm="head", sliding="from", experts=QWEN3_MOE),
    "gpt_oss": replace(LLAMA, sinks=True, experts=GPT_OSS, sliding="pattern", pattern=2),
    "smollm3": replace(LLAMA, nope="no_rope_layers", sliding="nope"),
    "gemma2": GEMMA,
    "gemma3_text": replace(GEMMA, qk_norm="head", softcap=None, pattern=6, default_base=1e6,   # its attention
                           local_base="rope_local_base_freq"),                               # ignores the cap
    "olmo2": replace(LLAMA, attn_in=None, attn_out="post_attention_layernorm", mlp_in=None,
                     mlp_out="post_feedforward_layernorm", qk_norm="all"),
    "phi3": replace(LLAMA, qkv="qkv_proj", gate_up="gate_up_proj", mlp=("down_proj",), sliding="all"),
    "bloom": Family(keys=BLOOM_KEYS, activation="gelu_bloom", embed_norm="word_embeddings_layernorm", **OLD_BLOCK,
                    fused="heads", biases="all", position="alibi"),
    "falcon": Family(keys=dict(BLOOM_KEYS, heads=("num_attention_heads", "n_head"),
                               groups=("num_kv_heads", "n_head_kv"),
                               layers=("num_hidden_layers", "n_layer"), inner=("ffn_hidden_size",),
                               positions=("max_position_embeddings",), activation=("activation",)),
                     activation="gelu", **OLD_BLOCK),   # its switches: see falcon() below
    # DeepSeek: the rotary width is qk_rope_head_dim (the shared key's); the latent ranks are read by
    # mechanisms/latent/checkpoint.py, the experts' counts and routing by deepseek_experts.py
    "deepseek_v2": LATENT,
    "deepseek_v3": LATENT,
    "kimi_k2": LATENT,   # V3's layout
    # DeepSeek Sparse Attention: V3's latent attention and experts, a lightning indexer choosing each
    # query's keys (its rotary pairs: V3.2 half, GLM-5 interleaved)
    "deepseek_v32": replace(LATENT, indexer="half"),
    "glm_moe_dsa": replace(LATENT, indexer="interleaved"),
}


def falcon(family: Family, data: dict) -> Family:
    """Falcon's variants, from config.json's switches: the new architecture (grouped keys and
    values stored per group; attention and MLP side by side, from one norm or two) or the old one
    (multi-query: one key/value head after all the queries, or q, k, v per head; side by side or
    one after the other); rotary positions, or ALiBi added before the scores are scaled."""
    position = "alibi_unscaled" if data.get("alibi", False) is True else "rotary"
    common = dict(biases="all" if data.get("bias", False) is True else "saved", position=position)
    if data.get("new_decoder_architecture", False) is True:
        two = data.get("num_ln_in_parallel_attn") in (None, 2)
        return replace(family, fused="groups", parallel=True, attn_in="ln_attn" if two else "input_layernorm",
                       mlp_in="ln_mlp" if two else "input_layernorm", **common)
    parallel = data.get("parallel_attn", True) is True
    return replace(family, fused="blocks" if data.get("multi_query", True) is True else "heads", parallel=parallel,
                   groups="one" if data.get("multi_query", True) is True else "all",
                   mlp_in="input_layernorm" if parallel else "post_attention_layernorm", **common)


SWITCHES = {"falcon": falcon}   # families whose declaration depends on config.json's switches
