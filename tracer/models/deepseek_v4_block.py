"""DeepSeek V4's attention layers, run in float64 NumPy from the checkpoint's tensors (the names it
is published with: `layers.{i}.attn.wq_a`, `attn.compressor.wkv`, `attn.indexer.wq_b`, …).

Every layer reads a sliding window of its tokens through one key/value head with sinks. The
`compressed_sparse_attention` layers add a pool of compressed entries (m = 4, overlapping
windows) of which a lightning indexer keeps each query's top k; the `heavily_compressed_attention`
ones a pool of entries of m = 128 tokens, all of them read. Queries: q = RMSNorm(c_q·W_QB) per
head (no gain), c_q = RMSNorm(h·W_QA)·g; keys = values = RMSNorm(h·W_KV)·g; the last r features
of each turn (interleaved pairs): θ from rope_theta on sliding layers, from compress_rope_theta
(and yarn) on compressed ones, their compressors and indexer. The output's turned part is turned
back at the query's position, then projected group by group (W_a) and mixed (W_b)."""
from __future__ import annotations

import numpy as np

from ..errors import ScenarioError
from ..mechanisms.compressed import attention as att
from ..mechanisms.compressed import pool as pooling
from ..mechanisms.indexer import rotary, scores, topk

SPARSE, HEAVY = "compressed_sparse_attention", "heavily_compressed_attention"


def rms(x: np.ndarray, gain: np.ndarray | None, eps: float) -> np.ndarray:
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if gain is None else y * gain


def _want(c, kind: str) -> dict:
    """Each tensor the attention of a layer of `kind` reads (relative to `layers.{i}.attn.`), with
    the shape config.json implies (as saved, out × in)."""
    d, D, H, q = c.d_model, c.head_dim, c.heads, c.q_rank
    want = {"wq_a.weight": (q, d), "q_norm.weight": (q,), "wq_b.weight": (H * D, q), "wkv.weight": (D, d),
            "norm.weight": (D,), "wo_a.weight": (c.groups * c.group_rank, H * D // c.groups),
            "wo_b.weight": (d, c.groups * c.group_rank), "attn_sink": (H,)}
    if kind == "sliding_attention":
        return want
    m, width = c.rates[kind], (2 if kind == SPARSE else 1)
    want.update({"compressor.wkv.weight": (width * D, d), "compressor.wgate.weight": (width * D, d),
                 "compressor.ape": (m, width * D), "compressor.norm.weight": (D,)})
    if kind == SPARSE:
        HI, dI = c.index["heads"], c.index["dim"]
        want.update({"indexer.compressor.wkv.weight": (2 * dI, d), "indexer.compressor.wgate.weight": (2 * dI, d),
                     "indexer.compressor.ape": (m, 2 * dI), "indexer.compressor.norm.weight": (dI,),
                     "indexer.wq_b.weight": (HI * dI, q), "indexer.weights_proj.weight": (HI, d)})
    return want


def read_attention(t, c, pre: str, i: int) -> dict:
    """Layer i's attention tensors by their names after `attn.`, each checked against config.json."""
    at = f"{pre}layers.{i}.attn."
    return {name: t[at + name] for name in check_attention(t, c, pre, i)}


def check_attention(t, c, pre: str, i: int) -> list[str]:
    """The names (after `attn.`) of layer i's attention tensors, each there with the shape config.json
    implies (read from the files' headers: nothing is loaded), or one line naming the first that is not."""
    at = f"{pre}layers.{i}.attn."
    want = _want(c, c.kinds[i])
    for name, shape in want.items():
        if at + name not in t:
            raise ScenarioError(at + name, f"is missing; expected a {c.kinds[i]} layer's tensor of shape {shape}",
                                str(t.folder))
        if t.shape(at + name) != shape:
            raise ScenarioError(at + name, f"has shape {t.shape(at + name)}; expected {shape} for a {c.kinds[i]} "
                                f"layer (from config.json: index_n_heads {c.index['heads']}, index_head_dim "
                                f"{c.index['dim']}, head_dim {c.head_dim}, q_lora_rank {c.q_rank}, hidden_size "
                                f"{c.d_model}, {c.heads} heads)", str(t.folder))
    return list(want)


def compress(h: np.ndarray, w: dict, at: str, c, m: int, overlap: bool) -> dict:
    """The pooled entries of a compressor (`at`: "compressor." or "indexer.compressor."), normed and
    turned at their windows' first tokens: `k` (entry × d), `weights` (entry × slot × d)."""
    raw, weights = pooling.pool(h @ w[at + "wkv.weight"].T, h @ w[at + "wgate.weight"].T, w[at + "ape"], m, overlap)
    theta = rotary.angles(c.rope["compress"], np.arange(len(raw)) * m, c.rope_dims)
    k = rotary.turn(rms(raw, w[at + "norm.weight"], c.eps), theta, "interleaved", "last")
    return {"k": k, "weights": weights}


def index(h: np.ndarray, c_q: np.ndarray, w: dict, c, m: int) -> dict:
    """The lightning indexer over the compressed entries: idx.q, idx.k (its own pool: entry × d_I),
    idx.pool_weights, idx.w, idx.scores (query × entry; −∞ for entries not complete yet), idx.selected."""
    HI, dI, n = c.index["heads"], c.index["dim"], len(h)
    pooled = compress(h, w, "indexer.compressor.", c, m, True)
    theta = rotary.angles(c.rope["compress"], np.arange(n), c.rope_dims)
    q = rotary.turn((c_q @ w["indexer.wq_b.weight"].T).reshape(n, HI, dI).transpose(1, 0, 2), theta,
                    "interleaved", "last").transpose(1, 0, 2)
    wts = scores.head_weights(h, w["indexer.weights_proj.weight"])
    s = scores.index_scores(q, pooled["k"], wts, dI ** -0.5, pooling.visible(n, len(pooled["k"]), m))
    return {"idx.q": q.reshape(n, HI * dI), "idx.k": pooled["k"], "idx.pool_weights": pooled["weights"],
            "idx.w": wts, "idx.scores": s, "idx.selected": topk.select(s, c.index["topk"])}


def layer(x: np.ndarray, h: np.ndarray, w: dict, c, i: int) -> dict:
    """Every intermediate of layer i's attention on the normed stream h (x: the collapsed stream):
    c_q, q_norm and q (heads × token × D, before and after the turn), theta (p·θ of each position),
    kv (token × D, turned), pool.k and pool.weights, the indexer's steps, allowed (query × (tokens,
    entries)), weights and sink (heads × query × …), z (turned back), concat, o_groups and out."""
    kind, n, H, D = c.kinds[i], len(h), c.heads, c.head_dim
    theta = rotary.angles(c.rope["main" if kind == "sliding_attention" else "compress"], np.arange(n), c.rope_dims)
    p = {"x": x, "norm_in": h, "c_q": rms(h @ w["wq_a.weight"].T, w["q_norm.weight"], c.eps)}
    q = rms((p["c_q"] @ w["wq_b.weight"].T).reshape(n, H, D), None, c.eps).transpose(1, 0, 2)
    p["q_norm"], p["theta"] = q, theta
    p["q"] = rotary.turn(q, theta, "interleaved", "last")
    p["kv"] = rotary.turn(rms(h @ w["wkv.weight"].T, w["norm.weight"], c.eps), theta, "interleaved", "last")
    keys, allowed = p["kv"], att.sliding(n, c.window)
    if kind != "sliding_attention":
        m = c.rates[kind]
        pooled = compress(h, w, "compressor.", c, m, kind == SPARSE)
        p["pool.k"], p["pool.weights"] = pooled["k"], pooled["weights"]
        seen = pooling.visible(n, len(pooled["k"]), m)
        if kind == SPARSE:
            p.update(index(h, p["c_q"], w, c, m))
            seen = seen & p["idx.selected"]
        keys, allowed = np.concatenate([keys, pooled["k"]]), np.concatenate([allowed, seen], axis=1)
    p["allowed"] = allowed
    s = np.einsum("hid,jd->hij", p["q"], keys) * D ** -0.5
    p["weights"], p["sink"] = att.weights_with_sinks(s, allowed, w["attn_sink"])
    p["z"] = rotary.turn(p["weights"] @ keys, -theta, "interleaved", "last")
    p["concat"] = p["z"].transpose(1, 0, 2).reshape(n, H * D)
    p["o_groups"], p["out"] = att.grouped_output(p["concat"], w["wo_a.weight"], w["wo_b.weight"], c.groups)
    return p
