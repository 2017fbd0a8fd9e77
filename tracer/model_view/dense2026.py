"""The model view of the dense families of 2026 (CONTRACT §20, §17): each layer as their own forward
runs it (models/dense2026), its kind in words (chunked C, no positions, K = V, KV shared from layer
L), its memory (0 numbers a token where it reads another layer's cache: Gemma's table,
mechanisms/kv_sharing/cache.py; sliding and chunked layers keep the last W or C tokens, what a query
reads, as the other families' rows count them) and its circuits (a sharing layer's with its source
layer's W_K and W_V; K = V: W_V = W_K). Mistral 4's latent layers as DeepSeek's: the latent and
the rotary key are what they keep, their circuits through the rebuilt keys and values."""
from __future__ import annotations

from typing import Iterator

from ..mechanisms.kv_sharing.cache import table
from ..mechanisms.latent.compute import cache_per_token
from ..models.dense2026 import FORWARDS, gemma, llama4, mistral4, pre_norm, traced
from ..models.dense2026.common import Weights
from ..models.dense2026.settings import text_config
from . import circuits
from .kinds import Memory, Row, Seen


def kinds(data: dict) -> list[Row]:
    """Each layer's Row, from config.json alone."""
    text, kind = text_config(data), traced.supported(data)
    labels = traced.kinds(data)
    if kind in ("gemma4_text", "gemma3n_text"):
        cfg = gemma.read(data)
        rows = table(cfg["types"], cfg["head_dim"], cfg["groups"], cfg["k_eq_v"], text.get("num_kv_shared_layers", 0))
        return [Row(label + (", K = V" if r.k_eq_v and r.source == r.layer else ""), cfg["heads"], r.kv_heads,
                     Memory(r.per_token, 2 * cfg["heads"] * r.head_dim,
                            cfg["window"] if r.kind == "sliding" and r.per_token else None),
                     r.source, rows[r.source].k_eq_v) for label, r in zip(labels, rows)]
    if kind == "mistral4":   # latent attention: c_kv and k_pe are all a layer keeps (DeepSeek-V2's count)
        cfg = mistral4.read(data)
        sizes = cache_per_token(cfg["heads"], cfg["v"], 1, cfg["rank"], cfg["rot"])
        return [Row(label, cfg["heads"], cfg["heads"], Memory(sizes["MLA"], sizes["MHA"]), i, kv_cache="latent")
                for i, label in enumerate(labels)]
    cfg = llama4.read(data) if kind == "llama4_text" else pre_norm.read(text)
    width = 2 * cfg["head_dim"]
    window = [cfg["chunk"] if t == "chunked_attention" else cfg.get("window") if t == "sliding_attention" else None
              for t in cfg["types"]]
    return [Row(label, cfg["heads"], cfg["groups"], Memory(width * cfg["groups"], width * cfg["heads"], w), i)
            for i, (label, w) in enumerate(zip(labels, window))]


def layers(tensors, data: dict, ids: list[int]) -> Iterator[tuple[Row, Seen]]:
    """(kind, what it saw) for each layer in turn: the family's forward, one layer at a time."""
    w, every = Weights(tensors), kinds(data)
    for i, record in enumerate(FORWARDS[text_config(data)["model_type"]](tensors, data, ids)):
        kind = every[i]
        if kind.kv_cache == "latent":
            qk, ov = _latent_circuits(w, data, i)
            yield kind, Seen(record.weights, qk, ov)
            continue
        own, src = f"layers.{i}.self_attn.", f"layers.{kind.source}.self_attn."
        k = w.linear(src + "k_proj")
        v = k if kind.k_eq_v else w.linear(src + "v_proj")
        qk, ov = circuits.grouped(w.linear(own + "q_proj"), k, v, w.linear(own + "o_proj"), kind.heads, kind.kv_heads)
        yield kind, Seen(record.weights, qk, ov)


def _latent_circuits(w: Weights, data: dict, i: int) -> tuple:
    """Mistral 4's circuits as DeepSeek's (circuits.latent), from its tensors in the rows orientation."""
    cfg, own = mistral4.read(data), f"layers.{i}.self_attn."
    names = dict(kv_a="kv_a_proj_with_mqa", kv_b="kv_b_proj", o="o_proj",
                 **(dict(q_a="q_a_proj", q_b="q_b_proj") if cfg["q_rank"] else dict(q="q_proj")))
    sizes = dict(kv_rank=cfg["rank"], nope=cfg["nope"], rope=cfg["rot"], v=cfg["v"])
    return circuits.latent({key: w.linear(own + name) for key, name in names.items()}, sizes, cfg["heads"])


def itemsize(tensors) -> tuple[str, int]:
    """The dtype the token embeddings are saved in, and its bytes a number."""
    from .walk import BYTES, DTYPES
    saved = tensors.dtype(Weights(tensors).prefix + "embed_tokens.weight")
    return DTYPES.get(saved, saved.lower()), BYTES.get(saved, 4)
