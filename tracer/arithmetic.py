"""The arithmetic a trace runs in: the two presets of the contract and each key on its own.

`exact` is what a real model computes; `by-hand` is the classroom worksheet's stand-in
(⌊x/2⌋ for ÷√3, 3ˣ for eˣ, raw powers) that keeps every number small and rational.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from .errors import ScenarioError

PRESETS = {
    "exact": dict(scale="sqrt", softmax_base="e", normalize="softmax", stable=True, dtype="float64"),
    "by-hand": dict(scale="floor", softmax_base=3.0, normalize="softmax", stable=False, dtype="float64"),
}
KEYS = ("scale", "softmax_base", "normalize", "stable", "dtype", "mask", "layout")


@dataclass(frozen=True)
class Arithmetic:
    scale: str | float          # "sqrt" | "floor" | "none" | a number c (÷c)
    softmax_base: str | float   # "e" | a number > 1
    normalize: str              # "softmax" | "relu"
    stable: bool                # subtract each query's max before the power
    dtype: str                  # "float64" | "float32"
    mask: object = None         # None: the scenario's; "none" | "causal" | a 0/1 matrix
    layout: str | None = None   # None: the scenario's; "rows" | "columns"
    preset: str = "exact"

    def scale_divisor(self, d_k: int) -> float | None:
        """What the scores are divided by (None: left as they are)."""
        if self.scale == "sqrt":
            return math.sqrt(d_k)
        if self.scale == "floor":
            return float(max(1, round(math.sqrt(d_k))))
        if self.scale == "none":
            return None
        return float(self.scale)

    @property
    def base(self) -> float:
        return math.e if self.softmax_base == "e" else float(self.softmax_base)

    def as_dict(self) -> dict:
        """The resolved keys, as the exports write them."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if out["mask"] is not None and not isinstance(out["mask"], str):
            out["mask"] = [[int(v) for v in row] for row in out["mask"]]
        return out


def _number(key: str, value, check, expected: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ScenarioError(key, f"expected {expected}, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(number) or not check(number):
        raise ScenarioError(key, f"expected {expected}, got {value!r}")
    return number


def _parse(key: str, value):
    """One key's value, from a Python value or the text of `--set KEY=VALUE`."""
    text = value.strip().lower() if isinstance(value, str) else value
    if key == "scale":
        if text in ("sqrt", "floor", "none"):
            return text
        return _number(key, value, lambda c: c > 0, "sqrt, floor, none or a number > 0")
    if key == "softmax_base":
        if text == "e":
            return "e"
        return _number(key, value, lambda b: b > 1, "e or a number > 1")
    if key == "normalize":
        if text in ("softmax", "relu"):
            return text
        raise ScenarioError(key, f"expected softmax or relu, got {value!r}")
    if key == "stable":
        if isinstance(text, bool):
            return text
        if text in ("true", "1", "yes"):
            return True
        if text in ("false", "0", "no"):
            return False
        raise ScenarioError(key, f"expected true or false, got {value!r}")
    if key == "dtype":
        if text in ("float64", "float32"):
            return text
        raise ScenarioError(key, f"expected float64 or float32, got {value!r}")
    if key == "layout":
        if text in ("rows", "columns"):
            return text
        raise ScenarioError(key, f"expected rows or columns, got {value!r}")
    if key == "mask":
        if isinstance(text, str):
            if text in ("none", "causal"):
                return text
            raise ScenarioError(key, f"expected none, causal or a 0/1 matrix, got {value!r}")
        return value  # a matrix: checked against the scenario's size when it runs
    raise ScenarioError(key, f"unknown arithmetic key; expected one of {', '.join(KEYS)}")


def resolve(preset: str = "exact", overrides: dict | None = None) -> Arithmetic:
    """A preset with some keys changed; every value is checked here, before anything runs."""
    if preset not in PRESETS:
        raise ScenarioError("arithmetic", f"expected a preset, {' or '.join(PRESETS)}; got {preset!r}")
    arithmetic = Arithmetic(preset=preset, **PRESETS[preset])
    changes = {key: _parse(key, value) for key, value in (overrides or {}).items()}
    return replace(arithmetic, **changes)


def parse_set(items: list[str]) -> dict:
    """`--set KEY=VALUE` options as a dict of overrides (values parsed later by `resolve`)."""
    overrides = {}
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ScenarioError("--set", f"expected KEY=VALUE, got {item!r}")
        if key not in KEYS:
            raise ScenarioError(f"--set {key}", f"unknown key; expected one of {', '.join(KEYS)}")
        overrides[key] = value
    return overrides
