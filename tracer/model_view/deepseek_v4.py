"""The model view of DeepSeek V4 (CONTRACT §20, §18): each layer as its own forward runs it
(models/deepseek_v4_stream: the hyper-connections' streams, the compressed entries, the sinks), its
kind in words (`sliding 128`, `compressed 4, top-k 512`, `compressed 128`), its memory and its
circuits.

Memory: every layer keeps its one key/value head (K = V, D numbers a token) for the last W tokens,
the sliding window its queries read; a compressed layer adds one entry of D numbers every m tokens
(and its indexer's own entry of d_I when it has one), kept for the whole text. The matrices are
query × (tokens, then entries), as transformers returns the weights: the role scores read the
tokens' columns, the tiles show both. Circuits: W_Q = W_QA·W_QB (head h's columns) against W_KV,
OV = W_KV·W_O,h with W_O the grouped output folded into one matrix (block g of W_a, then W_b);
norms and rotations left out, as circuits.py leaves them."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from .. import memory
from ..errors import ScenarioError
from ..models import deepseek_v4_block as block
from ..models import deepseek_v4_stream as stream
from . import circuits
from .kinds import Row
from .kinds import Memory, Seen


def kinds(c) -> list[Row]:
    """Each layer's Row, from config.json alone (models/sparse_config.read_v4's sizes)."""
    D, mha = c.head_dim, 2 * c.heads * c.head_dim
    out = []
    for i, kind in enumerate(c.kinds):
        if kind == "sliding_attention":
            out.append(Row(f"sliding {c.window}", c.heads, 1, Memory(D, mha, c.window), i))
            continue
        m, sparse = c.rates[kind], kind == block.SPARSE
        label = f"compressed {m}" + (f", top-k {c.index['topk']}" if sparse else "")
        entry = D + (c.index["dim"] if sparse else 0)   # the entry, and the indexer's own entry
        out.append(Row(label, c.heads, 1, Memory(D, mha, c.window, pooled=(m, entry)), i,
                        kv_cache="window + entries"))
    return out


def check(folder, n: int) -> None:
    """Before any block runs: every layer's attention tensors against config.json (their shapes,
    from the files' headers) and the working memory of n tokens."""
    t, c, pre = stream.open_checkpoint(folder)
    for i in range(c.layers):
        block.check_attention(t, c, pre, i)
    entries = n // min(c.rates.values())
    need = 8 * (3 * c.heads * n * (n + entries) + c.index["heads"] * n * entries
                + n * c.hc["streams"] * 4 * c.d_model)   # scores, weights, mask; the indexer's votes; the streams
    if not memory.fits(need):
        raise ScenarioError("model.text", f"gives {n} tokens; running the blocks on them {memory.shortfall(need)}")


def _circuits(t, c, pre: str, i: int) -> tuple[np.ndarray, np.ndarray]:
    """(qk, ov) top singular values of layer i, every head reading the one key/value head."""
    w = block.read_attention(t, c, pre, i)
    H, G = c.heads, c.groups
    wq = w["wq_a.weight"].T @ w["wq_b.weight"].T                   # d × H·D
    wkv = w["wkv.weight"].T                                          # d × D: keys and values
    rank = w["wo_a.weight"].shape[0] // G
    wo = np.concatenate([w["wo_a.weight"][g * rank:(g + 1) * rank].T @ w["wo_b.weight"].T[g * rank:(g + 1) * rank]
                         for g in range(G)])                         # H·D × d: group g's heads, then W_b
    return circuits.grouped(wq, wkv, wkv, wo, H, 1)


def layers(folder, c, ids: list[int]) -> Iterator[tuple[Row, Seen]]:
    """(kind, what it saw) for each layer: the weights as DeepSeek V4's forward computes them."""
    t, _, pre = stream.open_checkpoint(folder)
    every = kinds(c)
    for i, got in enumerate(stream.each_layer(folder, ids, c.layers - 1)):
        qk, ov = _circuits(t, c, pre, i)
        yield every[i], Seen(got["weights"], qk, ov)


def itemsize(folder) -> tuple[str, int]:
    """The dtype the token embeddings are saved in, and its bytes a number."""
    from .walk import BYTES, DTYPES
    t, _, pre = stream.open_checkpoint(folder)
    saved = t.dtype(pre + "embed_tokens.weight" if pre else "embed.weight")
    return DTYPES.get(saved, saved.lower()), BYTES.get(saved, 4)
