"""config.json of the families whose attention chooses its keys, read into the sizes their block
forwards need (dsa_block.py, deepseek_v4_block.py), each value checked and refused by name:
DeepSeek V3.2 and GLM-5 (`glm_moe_dsa`): V3's latent attention and experts plus a lightning
indexer; DeepSeek V4: sliding, compressed-sparse and heavily-compressed layers, as transformers
5.24 reads them (published configs' older keys folded in the same way)."""
from __future__ import annotations

import numbers
from types import SimpleNamespace

from ..checks import kind
from ..errors import ScenarioError
from ..mechanisms.latent.checkpoint import latent_sizes
from .deepseek_experts import expert_sizes
from ..mechanisms.rotary.checkpoint import rope_spec

V4_KINDS = ("sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention")
V4_RATIO_KIND = {0: V4_KINDS[0], 4: V4_KINDS[1], 128: V4_KINDS[2]}   # legacy compress_ratios
V4_SCORING = ("sqrtsoftplus", "softmax", "sigmoid")
# what transformers' config classes assume where config.json is silent
DEFAULTS = {"deepseek_v32": dict(index_topk=2048, index_head_dim=128, index_n_heads=64),
            "glm_moe_dsa": dict(index_topk=2048, index_head_dim=128, index_n_heads=32),
            "deepseek_v4": dict(index_topk=512, index_head_dim=128, index_n_heads=64, sliding_window=128,
                                head_dim=512, q_lora_rank=1024, o_groups=8, o_lora_rank=1024)}


def whole(data: dict, key: str, default=None, low: int = 1) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ScenarioError(key, f"expected a whole number ≥ {low}, got {kind(value)}")
    return value


def real(data: dict, key: str, default=None, low: float = 0.0) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not low < value < float("inf"):
        raise ScenarioError(key, f"expected a finite number > {low:g}, got {kind(value)}")
    return float(value)


def _per_layer(data: dict, key: str, allowed: tuple, layers: int, default: list) -> list:
    value = data.get(key)
    if value is None:
        return default
    if not isinstance(value, list) or len(value) < layers or any(v not in allowed for v in value):
        raise ScenarioError(key, f"expected a list of {layers} values, each one of {', '.join(allowed)}; got "
                            f"{kind(value)}")
    return list(value[:layers])


def _indexer(data: dict) -> dict:
    data = {**DEFAULTS.get(data.get("model_type"), {}), **data}
    return dict(heads=whole(data, "index_n_heads"), dim=whole(data, "index_head_dim"), topk=whole(data, "index_topk"))


def _glm_schedule(data: dict, layers: int) -> list[str]:
    """Which layers run their own indexer when config.json has no indexer_types (GLM-5's older
    keys, as transformers reads them): index_topk_pattern ("FSSF…"), else every index_topk_freq-th
    layer from index_skip_topk_offset − 1 on (and every layer before it)."""
    pattern = data.get("index_topk_pattern")
    if isinstance(pattern, str):
        if any(ch not in "FS" for ch in pattern):
            raise ScenarioError("index_topk_pattern", f"expected letters F (full) and S (shared), got {kind(pattern)}")
        pattern = ["full" if ch == "F" else "shared" for ch in pattern]
    if pattern is not None:
        return _per_layer({"index_topk_pattern": pattern}, "index_topk_pattern", ("full", "shared"), layers, [])
    freq, offset = max(whole(data, "index_topk_freq", 1), 1), whole(data, "index_skip_topk_offset", 2, low=0)
    return ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(layers)]


def read_dsa(data: dict) -> SimpleNamespace:
    """DeepSeek V3.2 / GLM-5: the latent attention's sizes and rotary spec, the indexer's sizes,
    its pairs' layout (V3.2: half; GLM: interleaved) and which layers share the indexer of the
    layer before ("shared"), the dense and expert layers and the router."""
    model_type = data.get("model_type")
    data = {**DEFAULTS.get(model_type, {}), **data}
    layers = whole(data, "num_hidden_layers")
    mla = latent_sizes(data, "deepseek_v3")
    if data.get("q_lora_rank") is None:
        raise ScenarioError("q_lora_rank", "missing; expected the queries' latent rank (the indexer reads it)")
    mla["style"] = "interleaved"        # V3.2's code turns the latent attention's pairs interleaved always
    index = _indexer(data)
    if index["dim"] < mla["rope"]:
        raise ScenarioError("index_head_dim", f"expected at least qk_rope_head_dim ({mla['rope']}): the indexer "
                            f"turns its first {mla['rope']} features; got {index['dim']}")
    index["style"] = "interleaved" if model_type == "glm_moe_dsa" else "half"
    index["types"] = _per_layer(data, "indexer_types", ("full", "shared"), layers, _glm_schedule(data, layers))
    if index["types"][0] != "full":
        raise ScenarioError("indexer_types", "expected \"full\" for layer 0: a shared layer reuses the choice of "
                            "the full layer before it")
    dense = min(whole(data, "first_k_dense_replace", 0, low=0), layers)
    mlp = _per_layer(data, "mlp_layer_types", ("dense", "sparse"), layers,
                     ["dense"] * dense + ["sparse"] * (layers - dense))
    experts = expert_sizes(data, layers, "deepseek_v3")
    return SimpleNamespace(model_type=model_type, d_model=whole(data, "hidden_size"),
                           heads=whole(data, "num_attention_heads"), layers=layers,
                           inner=whole(data, "intermediate_size"), eps=real(data, "rms_norm_eps", 1e-6), mla=mla, index=index, mlp=mlp, experts=experts,
                           rope=rope_spec(data, "full_attention", mla["rope"]))


def _v4_rope(data: dict, r: int) -> dict:
    """{"main": spec, "compress": spec}: sliding layers turn with rope_theta, unscaled; compressed
    layers (and their compressors and indexer) with compress_rope_theta and any yarn, whose
    attention factor is 1 unless given (as transformers sets it)."""
    rp = data.get("rope_parameters") or data.get("rope_scaling") or {}
    if not isinstance(rp, dict):
        raise ScenarioError("rope_parameters", f"expected an object, got {kind(rp)}")
    if isinstance(rp.get("main"), dict) and isinstance(rp.get("compress"), dict):
        main, compress = rp["main"], rp["compress"]
    else:
        flat = {k: v for k, v in rp.items() if k not in ("main", "compress")}
        main = {"rope_type": "default", "rope_theta": data.get("rope_theta", 10000.0)}
        compress = {"rope_type": "default", **flat, "rope_theta": data.get("compress_rope_theta", 160000.0)}
        if compress.get("rope_type", compress.get("type")) == "yarn":
            compress.setdefault("attention_factor", 1.0)
    out = {}
    for name, params in (("main", main), ("compress", compress)):
        params = {k: v for k, v in params.items() if k != "partial_rotary_factor"}
        out[name] = rope_spec({"rope_parameters": params, "max_position_embeddings": data.get(
            "max_position_embeddings")}, "full_attention", r)
    return out


def _v4_kinds(data: dict, layers: int) -> list[str]:
    if data.get("layer_types") is None and isinstance(data.get("compress_ratios"), list):
        ratios = data["compress_ratios"]
        if any(r not in V4_RATIO_KIND for r in ratios):
            raise ScenarioError("compress_ratios", f"expected 0, 4 or 128 for each layer, got {kind(ratios)}")
        return _per_layer({"layer_types": [V4_RATIO_KIND[r] for r in ratios]}, "layer_types", V4_KINDS, layers, [])
    interleave = [V4_KINDS[1] if i % 2 else V4_KINDS[2] for i in range(max(layers - 2, 0))]
    default = [V4_KINDS[2]] * min(layers, 2) + interleave   # transformers' default: 2 heavy, then alternating
    return _per_layer(data, "layer_types", V4_KINDS, layers, default)


def read_v4(data: dict) -> SimpleNamespace:
    """DeepSeek V4: sizes, each layer's kind and its compression m, the rotary specs, the
    hyper-connections, the indexer, the grouped output and the routers (hash, then top-k)."""
    data = {**DEFAULTS["deepseek_v4"], **data}
    layers, d_head = whole(data, "num_hidden_layers"), whole(data, "head_dim")
    if data.get("partial_rotary_factor") is None and data.get("qk_rope_head_dim") is not None:
        r = whole(data, "qk_rope_head_dim")
    else:
        r = int(d_head * real(data, "partial_rotary_factor", 64 / 512))
    if r % 2 or not 2 <= r <= d_head:
        raise ScenarioError("partial_rotary_factor", f"expected an even number of the {d_head} features to turn, "
                            f"got {r}")
    rates = dict(data.get("compress_rates") or {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128})
    for legacy, name in (("compress_rate_csa", V4_KINDS[1]), ("compress_rate_hca", V4_KINDS[2])):
        if data.get(legacy) is not None:
            rates[name] = data[legacy]
    rates = {name: whole(rates, name) for name in V4_KINDS[1:]}
    hashed = min(whole(data, "num_hash_layers", 3, low=0), layers)
    heads, groups = whole(data, "num_attention_heads"), whole(data, "o_groups")
    if heads % groups:
        raise ScenarioError("o_groups", f"expected a divisor of the {heads} heads, got {groups}")
    scoring = data.get("scoring_func", "sqrtsoftplus")
    if scoring not in V4_SCORING:
        raise ScenarioError("scoring_func", f"{scoring!r} is not supported; expected one of {', '.join(V4_SCORING)}")
    top_k, experts = whole(data, "num_experts_per_tok"), whole(data, "n_routed_experts")
    if top_k > experts:
        raise ScenarioError("num_experts_per_tok", f"expected at most n_routed_experts ({experts}), got {top_k}")
    return SimpleNamespace(
        model_type="deepseek_v4", d_model=whole(data, "hidden_size"), heads=heads, layers=layers, head_dim=d_head,
        rope_dims=r, q_rank=whole(data, "q_lora_rank"), groups=groups, group_rank=whole(data, "o_lora_rank"),
        window=whole(data, "sliding_window"), eps=real(data, "rms_norm_eps", 1e-6), kinds=_v4_kinds(data, layers),
        rates=rates, rope=_v4_rope(data, r), index=_indexer(data),
        hc=dict(streams=whole(data, "hc_mult", 4), iters=whole(data, "hc_sinkhorn_iters", 20),
                eps=real(data, "hc_eps", 1e-6)),
        mlp=_per_layer(data, "mlp_layer_types", ("hash_moe", "moe"), layers,
                       ["hash_moe"] * hashed + ["moe"] * (layers - hashed)),
        router=dict(scoring=scoring, top_k=top_k, experts=experts, inner=whole(data, "moe_intermediate_size"),
                    routed_scaling_factor=real(data, "routed_scaling_factor", 1.5),
                    limit=real(data, "swiglu_limit", 10.0)))
