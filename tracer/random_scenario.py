"""The `[random]` section: inputs and weights drawn from a seed, for layers too large to type.

Weights are scaled by 1/√d_model so that projections keep unit variance, as a trained layer's
roughly do; the memory they need is estimated, and refused, before anything is allocated.
"""
from __future__ import annotations

import os

import numpy as np

from .errors import ScenarioError

KEYS = ("seed", "tokens", "d_model", "heads", "d_k", "d_v", "d_out", "output", "distribution", "dtype")


def physical_memory() -> int:
    """Bytes of RAM on this machine (a generous guess where the OS will not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 * 2**30


def _int(spec: dict, key: str, default=None, low: int = 1, high: int = 1 << 20) -> int:
    value = spec.get(key, default)
    if value is None:
        raise ScenarioError(f"random.{key}", "missing; expected a whole number")
    if isinstance(value, bool) or not isinstance(value, int) or not (low <= value <= high):
        raise ScenarioError(f"random.{key}", f"expected a whole number from {low} to {high}, got {value!r}")
    return value


def dims(spec) -> dict:
    """The checked sizes of a [random] section."""
    if not isinstance(spec, dict):
        raise ScenarioError("random", "expected a table (seed, tokens, d_model, heads, d_k, ...)")
    for key in spec:
        if key not in KEYS:
            raise ScenarioError(f"random.{key}", f"unknown field; expected one of {', '.join(KEYS)}")
    d = dict(seed=_int(spec, "seed", 0, 0, 2**63 - 1), n=_int(spec, "tokens"),
             d_model=_int(spec, "d_model"), heads=_int(spec, "heads", 1, 1, 4096), d_k=_int(spec, "d_k"))
    d["d_v"] = _int(spec, "d_v", d["d_k"])
    output = spec.get("output", d["heads"] > 1 or "d_out" in spec)
    if not isinstance(output, bool):
        raise ScenarioError("random.output", f"expected true or false, got {output!r}")
    d["d_out"] = _int(spec, "d_out", d["d_model"]) if output else None
    d["distribution"] = spec.get("distribution", "normal")
    if d["distribution"] not in ("normal", "uniform"):
        raise ScenarioError("random.distribution", f"expected \"normal\" or \"uniform\", got {d['distribution']!r}")
    d["dtype"] = spec.get("dtype", "float64")
    if d["dtype"] not in ("float64", "float32"):
        raise ScenarioError("random.dtype", f"expected \"float32\" or \"float64\", got {d['dtype']!r}")
    return d


def input_bytes(d: dict) -> int:
    """Bytes of x and all the weights."""
    cells = d["n"] * d["d_model"] + d["heads"] * d["d_model"] * (2 * d["d_k"] + d["d_v"])
    if d["d_out"]:
        cells += d["heads"] * d["d_v"] * d["d_out"]
    return cells * np.dtype(d["dtype"]).itemsize


def generate(spec, layout: str) -> dict:
    """x and [weights] as a scenario file would hold them, in `layout`'s orientation."""
    d = dims(spec)
    need, have = input_bytes(d), physical_memory()
    if need > 0.6 * have:
        raise ScenarioError("random", f"needs {need / 2**30:.1f} GiB for its input and weights, more than "
                            f"this machine can hold ({have / 2**30:.1f} GiB of RAM); expected smaller sizes")
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
