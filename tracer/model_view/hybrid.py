"""The model view of the hybrid checkpoints (CONTRACT §20, §16: Qwen3-Next, Qwen3.5, OLMo-Hybrid, Kimi
Linear): each layer as models/hybrid_block runs it, its kind in the words of `show` (`linear (delta)`,
`global, rope 25 %`, `latent, NoPE`) and what it keeps. A linear layer keeps a state, value heads ·
d_k · d_v numbers whatever the length and none a token; its matrices are the implicit weights (signed:
they can be negative and need not sum to 1). A softmax layer keeps its KV cache a token (Kimi's latent
layers: the latent and the shared rotary key). Circuits as circuits.py reads them off the weights,
the convolution, the norms and the gates left out; a linear head reads its key head's W_Q and W_K."""
from __future__ import annotations

from dataclasses import replace
from typing import Iterator

import numpy as np

from ..models import hybrid_tensors
from ..models.hybrid_block import embed, run_block
from ..models.hybrid_config import Hybrid
from ..models.hybrid_layer import kinds as labels
from . import circuits
from .kinds import Memory, Row, Seen
from .walk import BYTES, DTYPES


def kinds(cfg: Hybrid) -> list[Row]:
    """Each layer's Row, from the config alone."""
    state = cfg.v_heads * cfg.d_k * cfg.d_v
    linear = Row("", cfg.v_heads, cfg.k_heads, Memory(0, cfg.v_heads * (cfg.d_k + cfg.d_v), state=state),
                 kv_cache="state")
    if cfg.mla:
        from ..mechanisms.latent.compute import cache_per_token
        m = cfg.mla
        sizes = cache_per_token(cfg.heads, m["v"], 1, m["kv_rank"], m["rope"])
        softmax = Row("", cfg.heads, cfg.heads, Memory(sizes["MLA"], sizes["MHA"]), kv_cache="latent")
    else:
        softmax = Row("", cfg.heads, cfg.kv_heads, Memory(2 * cfg.kv_heads * cfg.head_dim,
                                                           2 * cfg.heads * cfg.head_dim))
    return [replace(linear if lin else softmax, label=label) for label, lin in zip(labels(cfg), cfg.linear)]


def layers(tensors, cfg: Hybrid, ids: list[int]) -> Iterator[tuple[Row, Seen]]:
    """(kind, what it saw) for each layer in turn: the blocks of both kinds, a linear layer's
    implicit weights computed (its states are not: the view does not show them)."""
    x, every = embed(tensors, ids), kinds(cfg)
    for i, kind in enumerate(every):
        keep = {"states": False, "implicit": True} if cfg.linear[i] else {}
        with np.errstate(all="ignore"):
            x, parts = run_block(x, tensors, cfg, i, **keep)
        if cfg.linear[i]:
            yield kind, Seen(parts["implicit"], *_linear_circuits(hybrid_tensors.linear_mixer(tensors, cfg, i), cfg),
                             signed=True)
        else:
            yield kind, Seen(parts["weights"], *_softmax_circuits(hybrid_tensors.attention(tensors, cfg, i), cfg))


def _linear_circuits(w: dict, cfg: Hybrid) -> tuple:
    """(qk, ov) of a linear layer's value heads: value head h reads key head h·key_heads // heads."""
    kd = cfg.k_heads * cfg.d_k
    g = np.arange(cfg.v_heads) * cfg.k_heads // cfg.v_heads
    wq, wk = (circuits.per_head(w["qkv"][:, j * kd:(j + 1) * kd], cfg.k_heads) for j in (0, 1))
    qk = circuits.top_singular(wq, wk)[g]
    return qk, circuits.top_singular(circuits.per_head(w["qkv"][:, 2 * kd:], cfg.v_heads),
                                     circuits.per_head(w["out"].T, cfg.v_heads))


def _softmax_circuits(w: dict, cfg: Hybrid) -> tuple:
    if cfg.mla:
        return circuits.latent({key: a for key, a in w.items() if a is not None}, cfg.mla, cfg.heads)
    return circuits.grouped(w["q"], w["k"], w["v"], w["o"], cfg.heads, cfg.kv_heads)


def itemsize(tensors) -> tuple[str, int]:
    """The dtype the token embeddings are saved in, and its bytes a number."""
    saved = tensors.dtype(hybrid_tensors.prefix(tensors) + "embed_tokens.weight")
    return DTYPES.get(saved, saved.lower()), BYTES.get(saved, 4)
