"""How a trace's axes and rows are named for a person: token names or indices on each axis, and
each query's most-attended keys (one rule, so the CLI's diff and the TUI's name the same keys)."""
from __future__ import annotations

from collections import Counter

import numpy as np

TOKEN_AXES = ("token", "query", "key", "context")
TIE = 1e-9   # weights within this fraction of a query's largest are tied for most-attended


def axis_labels(trace, axis: str, size: int, start: int = 0) -> list[str]:
    """Token names on token axes (token, query, key) from token `start` on, Σ on the one-wide
    axis, indices elsewhere."""
    if axis in ("key", "context"):   # the context's tokens under cross-attention
        return distinct(trace.scenario.key_tokens)[start:]
    if axis in TOKEN_AXES:
        return distinct(trace.scenario.tokens)[start:]
    if axis == "one":
        return ["Σ"]
    if axis == "d_model" and trace.scenario.features:
        return list(trace.scenario.features)
    if axis == "d_v" and getattr(trace.scenario, "value_features", None):
        return list(trace.scenario.value_features)
    return [str(i) for i in range(size)]


def step_labels(trace, step) -> tuple[list[str], list[str]]:
    """A step's row and column names: a key block's columns start at its first key, a decoded
    token's row is that token, a running max's one column is `max`, not Σ."""
    names = (axis_labels(trace, axis, size, start) for axis, size, start in zip(step.axes, step.shape, step.starts))
    word = ONE_WIDE.get(step.kind)
    return tuple([word] if word and axis == "one" else n for axis, n in zip(step.axes, names))


def distinct(names: list[str]) -> list[str]:
    """Token names as tables, cell lines and exports print them: each as `token_name` writes it,
    so that five `la` read `la#0` … `la#4` on an axis, and a name said once stays as it is."""
    counts = Counter(names)
    return [f"{name}#{i}" if counts[name] > 1 else name for i, name in enumerate(names)]


def token_name(names: list[str], index: int) -> str:
    """A token as explanations name it: `bank`, or `the#3` (its index, from 0) where the name repeats."""
    name = names[index]
    return f"{name}#{index}" if names.count(name) > 1 else name


AXIS_TITLES = {"one": "sum"}   # the one-wide axis of the sums, named for a reader
ONE_WIDE = {"max": "max", "rescale": "rescale", "freqs": "θ"}   # one-wide steps (by kind) that hold no sum


def axis_title(axis: str, kind: str | None = None) -> str:
    """An axis as the tables of a step of `kind` name it (the exports keep the contract's names)."""
    if axis == "one" and kind in ONE_WIDE:
        return ONE_WIDE[kind]
    return AXIS_TITLES.get(axis, axis)


def keys_text(names: list[str], keys: list[int]) -> str:
    """Most-attended keys as the CLI's diff and the TUI's write them: `x2`, `x1, x2, x4 (tied)`,
    or `none` (every key masked)."""
    if not keys:
        return "none"
    text = ", ".join(_short(names[k]) for k in keys)
    return text + " (tied)" if len(keys) > 1 else text


def _short(name: str, width: int = 24) -> str:
    """A token's name in a table or a note: one line, at most `width` characters."""
    from .errors import one_line
    return one_line(name, width)


def top_keys(weights_rows: np.ndarray) -> list[list[int]]:
    """Each query's most-attended keys, ascending (several on a tie; none when all weights are 0),
    from weights in the rows orientation (query × key)."""
    w = np.asarray(weights_rows, dtype=np.float64)
    best = w.max(axis=1, keepdims=True) if w.shape[1] else np.zeros((w.shape[0], 1))
    close = (w >= best - TIE * np.abs(best)) & (best > 0)
    return [np.flatnonzero(row).tolist() for row in close]
