"""The model view of the dense families of 2026 (CONTRACT §20, §17): each layer as their own forward
runs it (models/dense2026), its kind in words (chunked C, no positions, K = V, KV shared from layer
L), its memory (0 numbers a token where it reads another layer's cache: Gemma's table,
mechanisms/kv_sharing/cache.py; sliding and chunked layers keep the last W or C tokens, what a query
reads, as the other families' rows count them) and its circuits (a sharing layer's with its source
layer's W_K and W_V; K = V: W_V = W_K)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..mechanisms.kv_sharing.cache import table
from ..models.dense2026 import FORWARDS, gemma, llama4, pre_norm, traced
from ..models.dense2026.common import Weights
from ..models.dense2026.settings import text_config
from . import circuits
from .kinds import Memory, Seen


@dataclass
class Kind:
    """What the view shows of one layer besides its matrices."""
    label: str
    heads: int
    kv_heads: int
    memory: Memory
    source: int                      # the layer whose W_K and W_V its keys and values come from
    k_eq_v: bool = False
    kv_cache: str = "KV cache"


def kinds(data: dict) -> list[Kind]:
    """Each layer's Kind, from config.json alone."""
    text = text_config(data)
    labels, kind = traced.kinds(data), text["model_type"]
    if kind in ("gemma4_text", "gemma3n_text"):
        cfg = gemma.read(data)
        rows = table(cfg["types"], cfg["head_dim"], cfg["groups"], cfg["k_eq_v"], text.get("num_kv_shared_layers", 0))
        return [Kind(label + (", K = V" if r.k_eq_v and r.source == r.layer else ""), cfg["heads"], r.kv_heads,
                     Memory(r.per_token, 2 * cfg["heads"] * r.head_dim,
                            cfg["window"] if r.kind == "sliding" and r.per_token else None),
                     r.source, rows[r.source].k_eq_v) for label, r in zip(labels, rows)]
    cfg = llama4.read(data) if kind == "llama4_text" else pre_norm.read(text)
    width = 2 * cfg["head_dim"]
    window = [cfg["chunk"] if t == "chunked_attention" else cfg.get("window") if t == "sliding_attention" else None
              for t in cfg["types"]]
    return [Kind(label, cfg["heads"], cfg["groups"], Memory(width * cfg["groups"], width * cfg["heads"], w), i)
            for i, (label, w) in enumerate(zip(labels, window))]


def layers(tensors, data: dict, ids: list[int]) -> Iterator[tuple[Kind, Seen]]:
    """(kind, what it saw) for each layer in turn: the family's forward, one layer at a time."""
    w, every = Weights(tensors), kinds(data)
    for i, record in enumerate(FORWARDS[text_config(data)["model_type"]](tensors, data, ids)):
        kind = every[i]
        own, src = f"layers.{i}.self_attn.", f"layers.{kind.source}.self_attn."
        k = w.linear(src + "k_proj")
        v = k if kind.k_eq_v else w.linear(src + "v_proj")
        qk, ov = circuits.grouped(w.linear(own + "q_proj"), k, v, w.linear(own + "o_proj"), kind.heads, kind.kv_heads)
        yield kind, Seen(record.weights, qk, ov)


def itemsize(tensors) -> tuple[str, int]:
    """The dtype the token embeddings are saved in, and its bytes a number."""
    from .walk import BYTES, DTYPES
    saved = tensors.dtype(Weights(tensors).prefix + "embed_tokens.weight")
    return DTYPES.get(saved, saved.lower()), BYTES.get(saved, 4)
