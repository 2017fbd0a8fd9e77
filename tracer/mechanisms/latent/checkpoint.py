"""DeepSeek's config.json beyond the Llama family's keys: the sizes of multi-head latent
attention and the experts' counts and routing, each checked and refused by name."""
from __future__ import annotations

import math
import numbers

from ...checks import kind
from ...errors import ScenarioError

MLA_KEYS = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
EXPERT_KEYS = ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size")


def _whole(data: dict, key: str, default=None, low: int = 1, need: str = "") -> int:
    value = data.get(key, default)
    if value is None:
        raise ScenarioError(key, f"missing; expected a whole number ≥ {low}{need}")
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ScenarioError(key, f"expected a whole number ≥ {low}, got {kind(value)}")
    return value


def latent_sizes(data: dict, model_type: str) -> dict:
    """{"q_rank" (None: queries not compressed), "kv_rank", "nope", "rope", "v", "style"}: the
    shape of the layer's latent attention, with the rotary pairs' layout (V2 always interleaved
    pairs; V3 unless rope_interleave is false)."""
    why = " (multi-head latent attention's sizes)"
    out = dict(kv_rank=_whole(data, "kv_lora_rank", need=why), nope=_whole(data, "qk_nope_head_dim", need=why),
               rope=_whole(data, "qk_rope_head_dim", need=why), v=_whole(data, "v_head_dim", need=why))
    out["q_rank"] = None if data.get("q_lora_rank") is None else _whole(data, "q_lora_rank")
    if out["rope"] % 2:
        raise ScenarioError("qk_rope_head_dim", f"expected an even number (rotary pairs), got {out['rope']}")
    interleave = model_type == "deepseek_v2" or data.get("rope_interleave", True) is not False
    out["style"] = "interleaved" if interleave else "half"
    out["mscale"] = _mscale(data)
    return out


def _mscale(data: dict) -> float:
    """yarn's mscale², which DeepSeek multiplies into the scores' scale when the rope parameters
    give mscale_all_dim (as transformers does: 0.1·m·ln(factor) + 1, squared); else 1."""
    params = data.get("rope_scaling") or data.get("rope_parameters") or {}
    if not isinstance(params, dict) or params.get("rope_type", params.get("type", "default")) == "default":
        return 1.0
    every, factor = params.get("mscale_all_dim"), params.get("factor")
    if not every or not isinstance(factor, numbers.Real) or isinstance(every, bool) \
            or not isinstance(every, numbers.Real) or factor <= 1:
        return 1.0
    m = 0.1 * every * math.log(factor) + 1.0
    return m * m


def expert_sizes(data: dict, model_type: str) -> dict:
    """The experts' counts and routing: routed and shared experts, top k, their width, the dense
    layers before them, groups, scoring (V3 sigmoid, V2 softmax) and the weights' scaling."""
    why, v2 = " (the experts' counts)", model_type == "deepseek_v2"   # the others route as V3 does
    experts = _whole(data, "n_routed_experts", need=why)
    out = dict(experts=experts, top_k=_whole(data, "num_experts_per_tok", need=why),
               inner=_whole(data, "moe_intermediate_size", need=why),
               shared=_whole(data, "n_shared_experts", 0, low=0),
               dense=_whole(data, "first_k_dense_replace", 0, low=0),
               scoring="softmax" if v2 else "sigmoid",
               method=data.get("topk_method") or ("greedy" if v2 else "noaux_tc"),
               # transformers' V2 router never renormalises, whatever config.json says
               norm_topk_prob=not v2 and data.get("norm_topk_prob", True) is True,
               n_group=data.get("n_group"), topk_group=data.get("topk_group"))
    if out["top_k"] > experts:
        raise ScenarioError("num_experts_per_tok", f"expected at most n_routed_experts ({experts}), got {out['top_k']}")
    factor = data.get("routed_scaling_factor", 1.0)
    if isinstance(factor, bool) or not isinstance(factor, numbers.Real) or not factor > 0:
        raise ScenarioError("routed_scaling_factor", f"expected a number > 0, got {kind(factor)}")
    out["routed_scaling_factor"] = float(factor)
    if v2 and out["method"] not in ("greedy", "group_limited_greedy"):
        raise ScenarioError("topk_method", f"{out['method']!r} is not supported; expected greedy or "
                            "group_limited_greedy")
    grouped = out["scoring"] == "sigmoid" or out["method"] == "group_limited_greedy"
    if grouped and out["n_group"] not in (None, 1):
        groups = _whole(data, "n_group")
        if experts % groups or not 1 <= _whole(data, "topk_group", need=" (with n_group)") <= groups:
            raise ScenarioError("n_group", f"expected a divisor of the {experts} experts with topk_group ≤ it, got "
                                f"n_group {groups}, topk_group {data.get('topk_group')}")
        if out["scoring"] == "sigmoid" and experts // groups < 2:
            raise ScenarioError("n_group", f"expected groups of at least 2 experts (each is rated by its best "
                                f"two), got {experts} experts in {groups} groups")
    if data.get("moe_layer_freq", 1) != 1:
        raise ScenarioError("moe_layer_freq", f"{data.get('moe_layer_freq')!r} is not supported; expected 1 (every "
                            "layer after first_k_dense_replace has experts)")
    return out
