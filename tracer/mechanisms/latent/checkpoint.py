"""DeepSeek's config.json for its latent attention: the latent ranks, the heads' parts and the rotary
pairs' layout, each checked and refused by name (its experts: models/deepseek_experts.py)."""
from __future__ import annotations

import math
import numbers

from ...checks import kind
from ...errors import ScenarioError

MLA_KEYS = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


def whole(data: dict, key: str, default=None, low: int = 1, need: str = "") -> int:
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
    out = dict(kv_rank=whole(data, "kv_lora_rank", need=why), nope=whole(data, "qk_nope_head_dim", need=why),
               rope=whole(data, "qk_rope_head_dim", need=why), v=whole(data, "v_head_dim", need=why))
    out["q_rank"] = None if data.get("q_lora_rank") is None else whole(data, "q_lora_rank")
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
