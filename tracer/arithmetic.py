"""The arithmetic a trace runs in: the two presets of the contract and each key on its own.

`exact` is what a real model computes; `by-hand` is the classroom worksheet's stand-in
(⌊x/2⌋ for ÷√3, 3ˣ for eˣ, raw powers) that keeps every number small and rational.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from .checks import kind, suggest
from .errors import ScenarioError, one_line

PRESETS = {
    "exact": dict(scale="sqrt", softmax_base="e", normalize="softmax", stable=True, dtype="float64"),
    "by-hand": dict(scale="floor", softmax_base=3.0, normalize="softmax", stable=False, dtype="float64"),
}
KEYS = ("scale", "softmax_base", "normalize", "stable", "dtype", "mask", "layout", "algorithm", "block", "topk")
BLOCK = 64   # keys per block under `online` unless set: a FlashAttention tile; small scenarios set their own
MAX_BLOCK = 2**31 - 1   # a block wider than the keys is one block of them all
WORDS = {"algorithm": ("standard", "online"), "scale": ("sqrt", "floor", "none"), "softmax_base": ("e",), "normalize": ("softmax", "relu"),
         "dtype": ("float64", "float32"), "layout": ("rows", "columns"), "mask": ("none", "causal", "causal_lower_right")}


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
    algorithm: str = "standard"  # "standard": the whole score matrix; "online": keys in blocks (FlashAttention)
    block: int = BLOCK           # keys per block under "online"
    topk: int | None = None      # None: the scenario's [sparse] topk; else the keys each query keeps

    @property
    def online(self) -> bool:
        return self.algorithm == "online"

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
        if out["topk"] is None:   # only a run that changes a [sparse] scenario's topk says it
            del out["topk"]
        return out


def _number(key: str, value, check, expected: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number) or not check(number):
        raise ScenarioError(key, f"expected {expected}, got {_shown(value)}{suggest(value, WORDS.get(key, ()))}")
    return number


def _shown(value) -> str:
    """The value as the user wrote it (text from --set), or what kind of value it is."""
    return one_line(repr(value), 60) if isinstance(value, str) else kind(value)


def _word(key: str, value, text, words: tuple, expected: str):
    if isinstance(text, str) and text in words:
        return text
    raise ScenarioError(key, f"expected {expected}, got {_shown(value)}{suggest(value, words)}")


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
        return _word(key, value, text, WORDS[key], "softmax or relu")
    if key == "stable":
        if isinstance(text, bool):
            return text
        if text in ("true", "1", "yes"):
            return True
        if text in ("false", "0", "no"):
            return False
        raise ScenarioError(key, f"expected true or false, got {_shown(value)}")
    if key == "dtype":
        return _word(key, value, text, WORDS[key], "float64 or float32")
    if key == "layout":
        return _word(key, value, text, WORDS[key], "rows or columns")
    if key == "algorithm":
        return _word(key, value, text, WORDS[key], "standard or online")
    if key == "block":
        return int(_number(key, value, lambda b: 1 <= b <= MAX_BLOCK and b == int(b),
                           f"a whole number from 1 to {MAX_BLOCK} (keys per block)"))
    if key == "topk":   # a [sparse] scenario's keys per query (tracer/mechanisms/indexer)
        return int(_number(key, value, lambda k: k >= 1 and k == int(k), "a whole number ≥ 1 (the keys each query "
                           "keeps)"))
    if key == "mask":   # its words as a scenario file spells them: `causal`, never `Causal`
        text = value.strip() if isinstance(value, str) else value
        if isinstance(text, str) and text.startswith("["):  # --set mask=[[1,0],[1,1]]: a TOML array
            from .tomlfile import parse_toml
            return parse_toml(f"mask = {value}", None)["mask"]
        if isinstance(text, str) and text.startswith(("sliding:", "streaming:", "chunked:")):
            from .masks import read_mask
            return read_mask(text, 1, "rows")   # the word is checked here; the size when it runs
        if isinstance(text, str):
            return _word(key, value, text, WORDS[key],
                         "none, causal, causal_lower_right, sliding:W, streaming:S:W, chunked:C or a 0/1 matrix like "
                         "[[1,0],[1,1]]")
        return value  # a matrix: checked against the scenario's size when it runs
    raise ScenarioError(key, f"unknown arithmetic key{suggest(key, KEYS)}; expected one of {', '.join(KEYS)}")


def resolve(preset: str = "exact", overrides: dict | None = None) -> Arithmetic:
    """A preset with some keys changed; every value is checked here, before anything runs."""
    if not isinstance(preset, str) or preset not in PRESETS:
        raise ScenarioError("arithmetic", f"expected a preset, {' or '.join(PRESETS)}; got "
                            f"{_shown(preset)}{suggest(preset, tuple(PRESETS))}")
    arithmetic = Arithmetic(preset=preset, **PRESETS[preset])
    if not isinstance(overrides or {}, dict):
        raise ScenarioError("arithmetic", f"expected overrides as a table of keys, got {kind(overrides)}")
    changes = {key: _parse(key, value) for key, value in (overrides or {}).items()}
    arithmetic = replace(arithmetic, **changes)
    if arithmetic.online and arithmetic.normalize != "softmax":
        raise ScenarioError("algorithm", "expected normalize=softmax with algorithm=online (the running max "
                            "and sums rescale powers; relu has none), or algorithm=standard")
    return arithmetic


def parse_set(items: list[str]) -> dict:
    """`--set KEY=VALUE` options as a dict of overrides (values parsed later by `resolve`)."""
    overrides = {}
    for item in items:
        if not isinstance(item, str):
            raise ScenarioError("--set", f"expected KEY=VALUE, got {kind(item)}")
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ScenarioError("--set", f"expected KEY=VALUE (e.g. scale=sqrt), got {_shown(item)}")
        if key not in KEYS:
            raise ScenarioError(f"--set {key}", f"unknown key{suggest(key, KEYS)}; expected one of {', '.join(KEYS)}")
        try:
            _parse(key, value)  # checked now, so the error names the option
        except ScenarioError as err:
            raise ScenarioError(f"--set {key}", err.expected) from None
        overrides[key] = value
    return overrides
