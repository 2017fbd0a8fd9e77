"""A scenario's `[linear]` section (and `from_arrays(linear=...)`): the rule, the decay α and the
overwrite strength β in any of their written shapes, spread to one value per head and token (and key
channel, kda), each checked; every refusal one line naming the key and what was expected."""
from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np

from ...checks import kind
from ...errors import ScenarioError
from .formula import RULES, uses_beta

KEYS = ("rule", "decay", "beta", "l2")


class Linear(NamedTuple):
    rule: str
    alpha: np.ndarray        # heads × n × 1, or heads × n × d_k (kda's decay per key channel)
    beta: np.ndarray | None  # heads × n (delta, kda); None under the decay rule
    l2: bool


def read_linear(section, heads: int, n: int, d_k: int, where: str = "linear") -> Linear:
    """The section's keys checked and spread: decay and beta are a number (every head and token), a
    list of n (one a token), or one such list per head; kda's decay may also be n lists of d_k (a decay
    per token and key channel, every head) or one such per head. α ∈ (0, 1] (default 1), β ∈ [0, 2]
    (default 1)."""
    if not isinstance(section, dict):
        raise ScenarioError(where, f"expected a table with {', '.join(KEYS)}, got {kind(section)}")
    for key in section:
        if key not in KEYS:
            raise ScenarioError(f"{where}.{key}", f"is not a key of [linear]; expected one of {', '.join(KEYS)}")
    rule = section.get("rule")
    if "rule" not in section:
        raise ScenarioError(f"{where}.rule", f"is missing; expected one of {', '.join(map(repr, RULES))}")
    if rule not in RULES:
        got = repr(rule) if isinstance(rule, str) else kind(rule)
        raise ScenarioError(f"{where}.rule", f"expected one of {', '.join(map(repr, RULES))}, got {got}")
    l2 = section.get("l2", False)
    if not isinstance(l2, bool):
        raise ScenarioError(f"{where}.l2", f"expected true or false, got {kind(l2)}")
    width = d_k if rule == "kda" else 1
    alpha = _spread(section.get("decay", 1), heads, n, width, f"{where}.decay")
    _within(alpha, lambda a: 0 < a <= 1, "in (0, 1]: the share of the state that survives a token", f"{where}.decay")
    if not uses_beta(rule):
        if "beta" in section:
            raise ScenarioError(f"{where}.beta", "the decay rule adds k·vᵀ and overwrites nothing; expected no beta "
                                "(or rule = \"delta\")")
        return Linear(rule, alpha, None, l2)
    beta = _spread(section.get("beta", 1), heads, n, 1, f"{where}.beta")[..., 0]
    _within(beta, lambda b: 0 <= b <= 2, "in [0, 2]: how strongly a token overwrites what its key held "
            "(above 1 the state overshoots, as OLMo-Hybrid allows)", f"{where}.beta")
    return Linear(rule, alpha, beta, l2)


def _number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _spread(value, heads: int, n: int, width: int, field: str) -> np.ndarray:
    """heads × n × width from a number, n numbers, heads lists of n, or (width > 1) n lists of width
    or heads lists of those."""
    shapes = [(), (n,), (heads, n)] if width == 1 else [(), (n,), (n, width), (heads, n, width)]
    array = _array(value, field)
    if array.shape not in shapes:
        raise ScenarioError(field, f"expected {_shapes_text(shapes, heads, n, width)}, got a list shaped "
                            f"{array.shape}")
    if not np.isfinite(array).all():
        raise ScenarioError(field, f"expected finite numbers, got {array[~np.isfinite(array)].flat[0]}")
    if array.ndim == 2 and width == 1:
        array = array[:, :, None]                  # heads × n: one list per head
    elif array.ndim < 3:                           # shared by every head: (), (n,) or (n, width)
        array = array.reshape(1, n if array.ndim else 1, width if array.ndim == 2 else 1)
    return np.ascontiguousarray(np.broadcast_to(array, (heads, n, array.shape[-1])))


def _array(value, field: str) -> np.ndarray:
    """Nested lists of numbers as an array (a checkpoint's arrays as they are); strings, booleans, tables
    and ragged lists refused."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "iuf":
        return value.astype(float)
    def check(item):
        if isinstance(item, list):
            for x in item:
                check(x)
        elif not _number(item):
            raise ScenarioError(field, f"expected numbers, got {kind(item)}")
    check(value)
    try:
        return np.asarray(value, dtype=float)
    except ValueError:
        raise ScenarioError(field, "expected lists of equal lengths, got a ragged list") from None


def _shapes_text(shapes, heads: int, n: int, width: int) -> str:
    words = {(): "a number", (n,): f"a list of {n} (one a token)", (heads, n): f"{heads} lists of {n} (one a head)",
             (n, width): f"{n} lists of {width} (a token's key channels)",
             (heads, n, width): f"{heads} lists of {n} lists of {width} (one a head)"}
    return ", ".join(words[s] for s in shapes[:-1]) + f" or {words[shapes[-1]]}"


def _within(array: np.ndarray, ok, words: str, field: str) -> None:
    bad = [float(x) for x in array.ravel() if not ok(float(x))]
    if bad:
        raise ScenarioError(field, f"expected each {words}; got {bad[0]:g}")
