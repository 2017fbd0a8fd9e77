"""Masks: which keys each query may attend, from a word (`causal`, `causal_lower_right`,
`sliding:W`, `streaming:S:W`, `chunked:C`) or a 0/1 matrix written like the layout's scores; stored as
query × key booleans."""
from __future__ import annotations

import functools

import numpy as np

from .checks import kind, matrix, suggest
from .errors import ScenarioError
from .mechanisms.chunked.formula import chunk_start

WORDS = ("none", "causal", "causal_lower_right", "sliding:W", "streaming:S:W", "chunked:C")
MAX_WINDOW = 2**31 - 1   # more keys than any scenario has: a wider window is the causal mask


def read_mask(value, n: int, layout: str, m: int | None = None):
    """A mask word, or an n × m 0/1 matrix (query × key; key × query in the columns layout)."""
    m = n if m is None else m
    if isinstance(value, str):
        if value in ("none", "causal", "causal_lower_right"):
            return value
        if value.startswith("sliding:"):
            width = value.partition(":")[2]
            if _whole(width, 1):
                return f"sliding:{int(width)}"
            raise ScenarioError("mask", f"expected sliding:W with a whole number W from 1 to {MAX_WINDOW} (the keys "
                                f"a query sees), got {_shown(value)}")
        if value.startswith("streaming:"):
            return _streaming(value)
        if value.startswith("chunked:"):
            return _chunked(value)
        raise ScenarioError("mask", f"expected one of {', '.join(WORDS)} or a matrix of 0/1, {n} × {m}, got "
                            f"{kind(value)}{suggest(value, WORDS[:3])}")
    if isinstance(value, np.ndarray) and value.dtype == bool:
        value = value.astype(np.int8)
    a = matrix(value, "mask")
    want = (n, m) if layout == "rows" else (m, n)
    if a.shape != want:
        axes = "query × key" if layout == "rows" else "key × query"
        raise ScenarioError("mask", f"expected a {want[0]} × {want[1]} matrix ({axes}), got {a.shape[0]} × {a.shape[1]}")
    if not np.isin(a, (0, 1)).all():
        r, c = np.argwhere(~np.isin(a, (0, 1)))[0]
        raise ScenarioError(f"mask[{r}][{c}]", f"expected 0 or 1 (1 = may attend), got {a[r, c]:g}")
    allowed = a.astype(bool)
    return allowed if layout == "rows" else allowed.T.copy()


def _whole(text: str, low: int) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 10 and low <= int(text) <= MAX_WINDOW


def _shown(value: str) -> str:
    return kind(value if len(value) <= 40 else value[:40] + "…")


def _streaming(value: str) -> str:
    """`streaming:S:W`: StreamingLLM's cache, the first S tokens kept for ever (what the paper calls
    attention sinks; not gpt-oss's sink logits, mechanisms/sinks.py) and a window
    of the W most recent keys."""
    parts = value.split(":")
    if len(parts) == 3 and _whole(parts[1], 0) and _whole(parts[2], 1):
        return f"streaming:{int(parts[1])}:{int(parts[2])}"
    raise ScenarioError("mask", f"expected streaming:S:W with whole numbers S ≥ 0 (the first tokens every query "
                        f"keeps) and W from 1 to {MAX_WINDOW} (the recent keys it sees), got {_shown(value)}")


def _chunked(value: str) -> str:
    """`chunked:C`: Llama 4's chunks, a query sees the earlier keys of its own chunk of C tokens."""
    size = value.partition(":")[2]
    if _whole(size, 1):
        return f"chunked:{int(size)}"
    raise ScenarioError("mask", f"expected chunked:C with a whole number C from 1 to {MAX_WINDOW} (the tokens of "
                        f"a chunk), got {_shown(value)}")


def chunk(mask) -> int | None:
    """C of a chunked mask, else None."""
    return int(mask.partition(":")[2]) if isinstance(mask, str) and mask.startswith("chunked:") else None


def streaming(mask) -> tuple[int, int] | None:
    """(S, W) of a streaming mask (the first tokens kept, the window), else None."""
    if isinstance(mask, str) and mask.startswith("streaming:"):
        s, w = mask.split(":")[1:]
        return int(s), int(w)
    return None


def allowed_matrix(mask, n: int, m: int | None = None) -> np.ndarray | None:
    """query × key booleans (True = may attend), or None when nothing is masked. Causal is
    PyTorch's `is_causal` (upper left: key j for query i iff j ≤ i); lower right shifts it by m − n.
    Small ones are remembered (a tiny trace would spend a third of its time building them)."""
    m = n if m is None else m
    if not isinstance(mask, str):
        return np.ascontiguousarray(mask, dtype=np.bool_)
    return _small_word_matrix(mask, n, m) if n * m <= 1 << 16 else _word_matrix(mask, n, m)


def _word_matrix(mask: str, n: int, m: int) -> np.ndarray | None:
    if mask == "none":
        return None
    i, j = np.arange(n)[:, None], np.arange(m)[None, :]
    if mask == "causal":
        return np.ascontiguousarray(j <= i)
    if mask == "causal_lower_right":
        return np.ascontiguousarray(j <= i + (m - n))
    if mask.startswith("streaming:"):
        kept, width = streaming(mask)
        return np.ascontiguousarray((j <= i) & ((j < kept) | (j > i - width)))
    if chunk(mask):
        start = chunk_start   # the first position of a chunk: mechanisms/chunked/formula.py
        return np.ascontiguousarray((j <= i) & (start(j, chunk(mask)) == start(i, chunk(mask))))
    width = int(mask.partition(":")[2])
    return np.ascontiguousarray((j <= i) & (j > i - width))


_small_word_matrix = functools.lru_cache(maxsize=32)(_word_matrix)


def mask_kind(mask) -> str:
    """A mask word as it is, a matrix as "matrix" (what kernels and plans tell apart)."""
    return mask if isinstance(mask, str) else "matrix"


def kernel_mask(trace) -> str:
    """The mask kind the fused kernels apply: the trace's, or a matrix where a lightning indexer's
    choice hides keys beside it (mechanisms/indexer)."""
    return "matrix" if trace.scenario.sparse is not None else mask_kind(trace.mask)


def mask_matrix(trace):
    """The trace's query × key matrix where one is needed, else None: `none` masks nothing, and
    `causal` is applied by index by the fused kernels and leaves every query key 0, so a large
    causal trace never builds its n × m matrix (Trace.allowed is built when first asked)."""
    return None if kernel_mask(trace) in ("none", "causal") else trace.allowed


def describe(mask, query: int | None = None, key: int | None = None) -> str:
    """Why a forbidden key is forbidden, in the words of the mask that was applied (and, given the
    query and the key, of this pair: a later key of a windowed mask comes after)."""
    if isinstance(mask, str) and mask in ("causal", "causal_lower_right"):
        return "comes after"
    if isinstance(mask, str) and query is not None and key is not None and key > query \
            and mask.startswith(("sliding:", "streaming:", "chunked:")):
        return "comes after"
    if chunk(mask) and query is not None and key is not None:
        c = chunk(mask)
        return f"is in chunk ⌊{key}/{c}⌋ = {key // c}, earlier but not in the chunk ⌊{query}/{c}⌋ = {query // c} of"
    if chunk(mask):
        return f"is outside the chunk of {chunk(mask)} tokens of"
    if isinstance(mask, str) and mask.startswith("sliding:"):
        return f"is outside the window of {mask.partition(':')[2]} keys of"
    if streaming(mask):
        kept, width = streaming(mask)
        first = "the first token" if kept == 1 else f"one of the first {kept} tokens"
        return f"is neither {first} nor in the window of {width} keys of"
    return "is hidden by the mask from"
