"""How a trace's axes and rows are named for a person: token names or indices on each axis, and
each query's most-attended keys (one rule, so the CLI's diff and the TUI's name the same keys)."""
from __future__ import annotations

import re
import weakref
from collections import Counter

import numpy as np

TOKEN_AXES = ("token", "query", "key", "context")
TIE = 1e-9   # weights within this fraction of a query's largest are tied for most-attended
LABEL_WIDTH = 24   # characters of a name where room is counted: tables, pictures, explanations
_named: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # trace → {(axis, size, start, width): names}


def short(name: str, index: int | None = None, width: int = LABEL_WIDTH) -> str:
    """A name in at most `width` characters: whole when it fits, else cut with … and ended by its
    index (`wwwwwwwwwwwwwwwwwwww…#3`: given, or the #3 it already ends in), so that two long names
    cut alike stay apart. A megabyte token must not make a table, a picture or a story that wide."""
    if len(name) <= width:
        return name
    if index is None:
        ends = re.search(r"#\d+$", name)
        tail = "…" + (ends.group() if ends else "")
    else:
        tail = f"…#{index}"
    return name[:max(width - len(tail), 1)] + tail


def axis_labels(trace, axis: str, size: int, start: int = 0, width: int | None = None) -> list[str]:
    """Token names on token axes (token, query, key) from token `start` on, Σ on the one-wide
    axis, indices elsewhere; with `width`, each cut to it (short: the cut ones end in their index).
    Named once per trace: a step of a large one named its 1024 tokens again for every panel shown
    and every cell moved to (0.2–0.4 ms each, a few times a step). Each call gets its own list."""
    key = (axis, size, start, width)
    try:
        kept = _named.setdefault(trace, {})
    except TypeError:   # a stand-in that cannot be weakly referenced: named each time
        return _axis_labels(trace, *key)
    if key not in kept:
        kept[key] = _axis_labels(trace, *key)
    return list(kept[key])


def _axis_labels(trace, axis: str, size: int, start: int, width: int | None) -> list[str]:
    if axis in ("key", "context"):   # the context's tokens under cross-attention
        names, first = distinct(trace.scenario.key_tokens)[start:], start
    elif axis in TOKEN_AXES:
        names, first = distinct(trace.scenario.tokens)[start:], start
    elif axis == "one":
        return ["Σ"]
    elif axis == "token_stream":   # DeepSeek V4's residual streams: token t's N rows, `the·0` … `the·3`
        streams = size // max(trace.scenario.n, 1)
        names, first = [f"{name}·{k}" for name in distinct(trace.scenario.tokens) for k in range(streams)][:size], 0
    elif axis in ("entry", "entry_slot"):   # DeepSeek V4's compressed entries (and their slots: e1·s3)
        slots = size // max(len(trace.scenario.key_tokens) - trace.scenario.n, 1)
        return [f"e{i}" if axis == "entry" else f"e{i // slots}·s{i % slots}" for i in range(size)]
    elif axis == "token·d_k":   # a linear layer's states, stacked: row t·d_k + i is row i of token t's state
        d_k = trace.scenario.d_k   # from token `start` on (a decoded token's state: its d_k rows)
        names, first = [f"{name}·{i}" for name in distinct(trace.scenario.tokens)[start:] for i in range(d_k)][:size], 0
    elif axis == "d_model" and trace.scenario.features:
        names, first = list(trace.scenario.features), 0
    elif axis == "d_v" and getattr(trace.scenario, "value_features", None):
        names, first = list(trace.scenario.value_features), 0
    else:
        return [str(i) for i in range(size)]
    names = names[:size]   # a decoded token's row, a block's keys: the axis holds `size` of them from `start`
    return names if width is None else [short(n, i, width) for i, n in enumerate(names, first)]


def step_labels(trace, step, width: int | tuple | None = None) -> tuple[list[str], list[str]]:
    """A step's row and column names: a key block's columns start at its first key, a decoded
    token's row is that token, a running max's one column is `max`, not Σ (a sink's share `sink`);
    with `width` (one for both axes, or the rows' and the columns'), each cut to it."""
    widths = width if isinstance(width, tuple) else (width, width)
    names = (axis_labels(trace, axis, size, start, w)
             for axis, size, start, w in zip(step.axes, step.shape, step.starts, widths))
    word = ONE_WIDE.get(step.kind)
    return tuple([word] if word and axis == "one" else n for axis, n in zip(step.axes, names))


def distinct(names: list[str]) -> list[str]:
    """Token names as tables, cell lines and exports print them: each as `token_name` writes it,
    so that five `la` read `la#0` … `la#4` on an axis, and a name said once stays as it is."""
    counts = Counter(names)
    return [f"{name}#{i}" if counts[name] > 1 else name for i, name in enumerate(names)]


def token_name(names: list[str], index: int) -> str:
    """A token as explanations name it: `bank`, or `the#3` (its index, from 0) where the name repeats,
    a long one cut (`wwwwwwwwwwwwwwwwwwww…#3`): a cell's story stays a line, whatever the token."""
    name = names[index]
    return short(f"{name}#{index}" if names.count(name) > 1 else name, index)


AXIS_TITLES = {"one": "sum"}   # the one-wide axis of the sums, named for a reader
ONE_WIDE = {"max": "max", "rescale": "rescale", "freqs": "θ", "sink": "sink", "decay": "α", "beta": "β"}   # one-wide steps (by kind) that hold no sum


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
    text = ", ".join(short(names[k], k) for k in keys)
    return text + " (tied)" if len(keys) > 1 else text


def top_keys(weights_rows: np.ndarray) -> list[list[int]]:
    """Each query's most-attended keys, ascending (several on a tie; none when all weights are 0),
    from weights in the rows orientation (query × key)."""
    w = np.asarray(weights_rows, dtype=np.float64)
    best = w.max(axis=1, keepdims=True) if w.shape[1] else np.zeros((w.shape[0], 1))
    close = (w >= best - TIE * np.abs(best)) & (best > 0)
    return [np.flatnonzero(row).tolist() for row in close]
