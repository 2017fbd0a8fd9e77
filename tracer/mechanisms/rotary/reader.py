"""[rope]: rotary positions as a scenario file writes them: the base, the style of the pairs, the
first position (or each token's own), partial rotary, the arithmetic of the angles, and the scaling of the frequencies for long
contexts (linear, llama3, yarn) with that type's keys."""
from __future__ import annotations

import numpy as np

from ...checks import choice, kind, number, quoted, suggest, unknown
from ...errors import ScenarioError
from .frequencies import SCALINGS

# each scaling's keys: (required, optional with its default; None: no default)
SCALING_KEYS = {"linear": (("factor",), {}),
                "llama3": (("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"), {}),
                "yarn": (("factor", "original_max_position_embeddings"),
                         {"beta_fast": 32.0, "beta_slow": 1.0, "attention_factor": None, "truncate": None}),
                "proportional": (("fraction",), {"factor": 1.0})}   # Gemma 4's global layers
ALL_SCALING_KEYS = tuple(dict.fromkeys(k for req, opt in SCALING_KEYS.values() for k in (*req, *opt)))
ROPE_KEYS = ("base", "style", "offset", "positions", "dims", "scaling", "angles", *ALL_SCALING_KEYS,
             "temperature", "sign")   # the query temperature's: mechanisms/q_temp; sign −1: nanochat
ANGLES = ("exact", "float32")   # how θ_i and p·θ_i are formed: float64, or float32 as PyTorch models do

EXACT = 2**53   # float64 holds every whole number up to here: beyond, neighbouring positions merge


def rope(value, d_k: int, n: int = 1, cross: bool = False) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ScenarioError("rope", f"expected a table with base, style and offset, got {kind(value)}")
    unknown(value, ROPE_KEYS, "rope.")
    if "scaling" not in value or value["scaling"] is None:
        for key in ALL_SCALING_KEYS:
            if key in value:
                raise ScenarioError(f"rope.{key}", f"expected only with scaling = {quoted(SCALINGS)} (a key of "
                                    "the frequencies' scaling)")
    base = number(value.get("base", 10000.0), "rope.base")
    if base <= 1:
        raise ScenarioError("rope.base", f"expected a number > 1, got {kind(value.get('base'))}")
    style = choice(value, "style", ("half", "interleaved"), "half", "rope.style")
    offset = value.get("offset", 0)
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 0:
        raise ScenarioError("rope.offset", f"expected a whole number ≥ 0 (the first token's position), got {kind(offset)}")
    offset = int(offset)   # a NumPy integer would wrap around in the sum below
    if offset + n - 1 > EXACT:   # the angles are position × frequency in float64
        raise ScenarioError("rope.offset", f"expected at most {EXACT - n + 1} for {n} tokens (positions beyond 2^53 "
                            f"can no longer be told apart in float64), got {offset}")
    dims = value.get("dims")
    still = dims == 0 and value.get("temperature") is not None and not isinstance(dims, bool)   # NoPE, warmed
    if dims is not None and not still and (isinstance(dims, bool) or not isinstance(dims, (int, np.integer)) or dims % 2
                             or not 2 <= dims <= d_k):
        raise ScenarioError("rope.dims", f"expected an even whole number from 2 to d_k = {d_k} (the features of "
                            f"each head that rotate, the first ones), got {kind(dims)}")
    if dims is None and d_k % 2:
        raise ScenarioError("rope", f"expected an even d_k (RoPE rotates pairs of features), got d_k = {d_k}")
    out = {"base": base, "style": style, "offset": int(offset), "scaling": scaling(value)}
    if choice(value, "angles", ANGLES, "exact", "rope.angles") == "float32":   # kept out of the spec when exact
        out["angles"] = "float32"
    if dims is not None and dims < d_k:
        out["dims"] = int(dims)
    if value.get("positions") is not None:
        out["positions"] = positions(value, n, cross)
    _proportional(out, value, d_k)
    sign = value.get("sign", 1)
    if isinstance(sign, bool) or sign not in (1, -1):
        raise ScenarioError("rope.sign", f"expected 1 or -1 (-1: every pair turns the other way, by −p·θ_i), got "
                            f"{kind(sign)}")
    if sign == -1:   # kept out of the spec when 1
        out["sign"] = -1
    return None if still else out   # dims = 0: positions that do not turn (only the temperature reads them)


def _proportional(spec: dict, value: dict, d_k: int) -> None:
    """Proportional rotary's fraction: at most 1, and at least one pair that turns."""
    s = spec["scaling"]
    if s is not None and s["type"] == "proportional" and not (s["fraction"] <= 1 and int(s["fraction"] * d_k // 2)):
        where = "rope.fraction" if "fraction" in value else "rope.scaling.fraction"
        raise ScenarioError(where, f"expected a number in (0, 1] that leaves a whole number of turning pairs (of the "
                            f"{d_k // 2} of d_k = {d_k}), got {s['fraction']:g}")


def positions(value: dict, n: int, cross: bool) -> tuple:
    """Each token's own position (tokens far apart without the tokens between), instead of offset."""
    got = value["positions"]
    if value.get("offset", 0) != 0:
        raise ScenarioError("rope.positions", "expected either positions or an offset, not both")
    if cross:
        raise ScenarioError("rope.positions", "expected self-attention (the positions are x's tokens'), not a context")
    if isinstance(got, np.ndarray):
        got = got.tolist()
    if not isinstance(got, (list, tuple)) or len(got) != n:
        raise ScenarioError("rope.positions", f"expected a list of {n} whole numbers (one per token), got {kind(got)}")
    for t, p in enumerate(got):
        if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or not 0 <= p <= EXACT:
            raise ScenarioError(f"rope.positions[{t}]", f"expected a whole number from 0 to 2^53, got {kind(p)}")
    return tuple(int(p) for p in got)


def scaling(rope: dict) -> dict | None:
    """[rope] scaling: a type with its keys beside it (`scaling = "llama3"`, `factor = 8`, …), or a
    table with `type` and the keys (`[rope.scaling]`, or from_arrays); None without scaling."""
    value = rope.get("scaling")
    if value is None:
        return None
    if isinstance(value, dict):
        table, where, kind_ = value, "rope.scaling.", value.get("type")
        field = "rope.scaling.type"
        unknown(table, ("type", *ALL_SCALING_KEYS), where)
        beside = next((key for key in ALL_SCALING_KEYS if key in rope), None)
        if beside:
            raise ScenarioError(f"rope.{beside}", "expected inside the scaling table (it is given as a table)")
    else:
        table, where, kind_, field = rope, "rope.", value, "rope.scaling"
    if not isinstance(kind_, str) or kind_ not in SCALINGS:
        raise ScenarioError(field, f"expected {quoted(SCALINGS)} (how the rotary frequencies are "
                            f"scaled for long contexts), got {kind(kind_)}{suggest(kind_, SCALINGS)}")
    required, optional = SCALING_KEYS[kind_]
    out = {"type": kind_}
    for key in ALL_SCALING_KEYS:
        if key in table and key not in required and key not in optional:
            raise ScenarioError(where + key, f"expected no {key} with scaling \"{kind_}\" (its keys: "
                                f"{', '.join((*required, *optional))})")
    for key in required:
        if table.get(key) is None:
            raise ScenarioError(where + key, f"missing; scaling \"{kind_}\" needs {', '.join(required)}")
        out[key] = _positive(table[key], where + key)
    for key, default in optional.items():
        got = table.get(key, default)
        if key == "truncate" and got is not None:   # false: yarn's ramp ends kept fractional (gpt-oss)
            if not isinstance(got, bool):
                raise ScenarioError(where + key, f"expected true or false, got {kind(got)}")
            if not got:
                out[key] = False
        elif got is not None:
            out[key] = _positive(got, where + key)
    if kind_ == "llama3" and out["high_freq_factor"] <= out["low_freq_factor"]:
        raise ScenarioError(where + "high_freq_factor", f"expected more than low_freq_factor "
                            f"({out['low_freq_factor']:g}), got {out['high_freq_factor']:g}")
    return out


def _positive(value, field: str) -> float:
    got = number(value, field)
    if got <= 0:
        raise ScenarioError(field, f"expected a number > 0, got {kind(value)}")
    return got


