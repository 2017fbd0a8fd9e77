"""The `[random]` section: inputs and weights drawn from a seed, for layers too large to type.

Weights are scaled by 1/√d_model so that projections keep unit variance, as a trained layer's
roughly do; the memory they need is estimated, and refused, before anything is allocated.
"""
from __future__ import annotations

import numpy as np

from .. import memory
from ..checks import choice, kind, unknown
from ..errors import ScenarioError
from ..steps.base import Dims

KEYS = ("seed", "tokens", "d_model", "heads", "d_k", "d_v", "d_out", "output", "distribution", "dtype")


def _int(spec: dict, key: str, default=None, low: int = 1, high: int = 1 << 20) -> int:
    value = spec.get(key, default)
    if value is None:
        raise ScenarioError(f"random.{key}", "missing; expected a whole number")
    if isinstance(value, bool) or not isinstance(value, int) or not (low <= value <= high):
        raise ScenarioError(f"random.{key}", f"expected a whole number from {low} to {high}, got {kind(value)}")
    return value


def dims(spec) -> dict:
    """The checked sizes of a [random] section."""
    if not isinstance(spec, dict):
        raise ScenarioError("random", f"expected a table (seed, tokens, d_model, heads, d_k, ...), got {kind(spec)}")
    unknown(spec, KEYS, "random.")
    d = dict(seed=_int(spec, "seed", 0, 0, 2**63 - 1), n=_int(spec, "tokens"),
             d_model=_int(spec, "d_model"), heads=_int(spec, "heads", 1, 1, 4096), d_k=_int(spec, "d_k"))
    d["d_v"] = _int(spec, "d_v", d["d_k"])
    output = spec.get("output", d["heads"] > 1 or "d_out" in spec)
    if not isinstance(output, bool):
        raise ScenarioError("random.output", f"expected true or false, got {kind(output)}")
    d["d_out"] = _int(spec, "d_out", d["d_model"]) if output else None
    d["distribution"] = choice(spec, "distribution", ("normal", "uniform"), "normal", "random.distribution")
    d["dtype"] = choice(spec, "dtype", ("float64", "float32"), "float64", "random.dtype")
    d["rank"] = 0
    return d


def input_bytes(d: dict) -> int:
    """Bytes of x and all the weights."""
    cells = d["n"] * d["d_model"] + d["heads"] * d["d_model"] * (2 * d["d_k"] + d["d_v"])
    if d["d_out"]:
        cells += d["heads"] * d["d_v"] * d["d_out"]
    return cells * np.dtype(d["dtype"]).itemsize


def run_bytes(d, itemsize: int) -> int:
    """Peak bytes of a run's intermediates (d: Dims, or the dict of `dims`): the whole trace when it
    is small enough to be kept whole, else the few heads a lazy trace holds at once."""
    from ..arithmetic import resolve
    from ..plan.cache import cells
    if isinstance(d, dict):
        d = Dims(n=d["n"], d_model=d["d_model"], heads=d["heads"], d_k=d["d_k"], d_v=d["d_v"],
                 d_out=d["d_out"] or d["heads"] * d["d_v"], rank=d.get("rank", 0), output=bool(d["d_out"]))
    head, layer = cells(d, resolve("exact"))
    z = d.n * d.d_v
    whole = (d.heads * head + layer) * itemsize
    if whole <= memory.EAGER_BYTES:
        return whole
    return (min(d.heads, memory.RESIDENT_HEADS + 1) * head + d.heads * z + layer) * itemsize


def refuse_if_too_big(need: int, field: str, what: str, n: int | None = None) -> None:
    """A ScenarioError, before anything is allocated, when `need` bytes would not fit."""
    if not memory.fits(need):
        tokens = f" ({n} tokens: each head holds n × n scores)" if n else ""
        raise ScenarioError(field, f"{what}{tokens} {memory.shortfall(need)}; expected smaller sizes")


def generate(spec, layout: str, run_itemsize: int = 8) -> dict:
    """x and [weights] as a scenario file would hold them, in `layout`'s orientation."""
    d = dims(spec)
    refuse_if_too_big(input_bytes(d) + run_bytes(d, run_itemsize), "random", "a run of these sizes", d["n"])
    rng = np.random.default_rng(d["seed"])
    dtype = np.dtype(d["dtype"])

    def draw(shape, fan_in: int) -> np.ndarray:
        if d["distribution"] == "normal":
            m = rng.standard_normal(shape, dtype=dtype)
        else:  # uniform with unit variance: U(−√3, √3)
            m = (rng.random(shape, dtype=dtype) * 2 - 1) * np.sqrt(3, dtype=dtype)
        if fan_in > 1:
            m *= dtype.type(1 / np.sqrt(fan_in))
        return m

    h, dm = d["heads"], d["d_model"]
    out = {"x": draw((d["n"], dm), 1),
           "weights": {"q": draw((h, dm, d["d_k"]), dm), "k": draw((h, dm, d["d_k"]), dm),
                       "v": draw((h, dm, d["d_v"]), dm)}}
    if d["d_out"]:
        out["weights"]["o"] = draw((h * d["d_v"], d["d_out"]), h * d["d_v"])
    if layout == "columns":  # the file's orientation: transposed views, no copies
        out["x"] = out["x"].T
        out["weights"] = {key: (m.transpose(0, 2, 1) if m.ndim == 3 else m.T) for key, m in out["weights"].items()}
    return out
