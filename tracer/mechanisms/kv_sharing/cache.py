"""What a model's KV cache holds, layer by layer, when its last layers share keys and values (Gemma
3n, Gemma 4): a layer that reads an earlier layer's keys and values keeps nothing (transformers
gives it a "dummy" cache layer); every other layer keeps its key/value heads' k and v, 2·g·d_k
numbers a token (K = V layers too: after the key's norm and rotation and the value's norm they are
different numbers, and transformers caches both); a sliding layer keeps at most its last W − 1
tokens between two steps, a global layer all of them."""
from __future__ import annotations

from dataclasses import dataclass

from .formula import sources


@dataclass(frozen=True)
class Row:
    """One layer of the table."""
    layer: int
    kind: str          # "sliding" or "global"
    head_dim: int
    kv_heads: int
    k_eq_v: bool
    source: int        # the layer whose keys and values it reads (itself: its own)
    per_token: int     # numbers one token adds to this layer's cache (0: it keeps none)


def table(types: list[str], head_dim: list[int], kv_heads: list[int], k_eq_v: list[bool], shared: int) -> list[Row]:
    """One Row a layer from its type (`sliding_attention` / `full_attention`), head size, key/value
    heads and K = V flag, and `num_kv_shared_layers`."""
    rows = []
    for i, src in enumerate(sources(types, shared)):
        own = src == i
        rows.append(Row(i, "sliding" if types[i] == "sliding_attention" else "global", head_dim[i], kv_heads[i],
                        k_eq_v[i], src, 2 * kv_heads[i] * head_dim[i] if own else 0))
    return rows


def kept(row: Row, tokens: int, window: int) -> int:
    """Tokens the layer's cache holds after `tokens` tokens: none when it reads another layer's,
    the last W − 1 on a sliding layer, all of them on a global one."""
    if row.per_token == 0:
        return 0
    return min(tokens, window - 1) if row.kind == "sliding" else tokens


def numbers(rows: list[Row], tokens: int, window: int) -> int:
    """Numbers the whole cache holds after `tokens` tokens."""
    return sum(r.per_token * kept(r, tokens, window) for r in rows)


def unshared(rows: list[Row], tokens: int, window: int) -> int:
    """What the cache would hold if every layer kept its own keys and values (its source's sizes)."""
    own = [Row(r.layer, r.kind, r.head_dim, r.kv_heads, r.k_eq_v, r.layer, 2 * r.kv_heads * r.head_dim) for r in rows]
    return numbers(own, tokens, window)
