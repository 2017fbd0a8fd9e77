"""A small DeepSeek V4 layer written here with NumPy, as from_arrays takes it (`compressed=`): random
W_QA, the gain of c_q and W_QB, the keys' W_KV and gain, entries of m = 2 tokens with overlapping
windows, an indexer of 2 heads over them (and its top-1 choice), two residual streams with their post and comb
mixes, and the mask they make (a window of 2, entries complete, entries kept). For the tests that
need a layer of every mechanism; the checkpoint's own layers are checked against transformers in
test_v4_traced.py."""
from __future__ import annotations

import numpy as np


def arrays(n: int = 5, heads: int = 2, d: int = 4, seed: int = 0, sinks: bool = True, d_model: int = 6) -> dict:
    """from_arrays keywords (without x, n × d_model) of a compressed sparse layer of n tokens: m = 2,
    window 2, top-1, with a sink per head or none."""
    rng = np.random.default_rng(seed)
    m, window, entries = 2, 2, n // 2
    theta = np.arange(n)[:, None] * np.array([[0.5]])              # one turned pair: the last 2 features
    w_qa, q_gain, w_qb = rng.normal(size=(d_model, 3)), 0.5 + rng.random(3), rng.normal(size=(heads, 3, d))
    pool = dict(w_c=rng.normal(size=(d_model, 2 * d)), w_z=rng.normal(size=(d_model, 2 * d)),   # series a | b
                bias=rng.normal(size=(m, 2 * d)), gain=0.5 + rng.random(d),
                theta=np.arange(entries)[:, None] * m * np.array([[0.5]]))                # at each entry's first token
    t, e = np.indices((n, entries))
    visible = e < (t + 1) // m
    index = dict(q=rng.normal(size=(n, 2 * 3)), k=rng.normal(size=(entries, 3)), w=rng.normal(size=(n, 2)), scale=0.5)
    votes = np.maximum(np.einsum("thd,ed->the", index["q"].reshape(n, 2, 3), index["k"]), 0)   # 2 index heads of 3
    scores = np.where(visible, np.einsum("th,the->te", index["w"], votes) * 0.5, -np.inf)
    selected = visible & (scores == scores.max(axis=1, keepdims=True))                  # top-1
    i, j = np.indices((n, n))
    allowed = np.concatenate([(j <= i) & (j > i - window), selected], axis=1)
    comb = rng.random((n, 2, 2))
    section = dict(kind="compressed_sparse_attention", window=window, m=m, topk=1, streams=2,
                   pre=rng.random((n, 2)), x_streams=rng.normal(size=(2 * n, d_model)), post=2 * rng.random((n, 2)),
                   comb=comb / comb.sum(axis=1, keepdims=True), w_qa=w_qa, q_gain=q_gain, w_qb=w_qb, eps=1e-6,
                   theta=theta,
                   w_kv=rng.normal(size=(d_model, d)), kv_gain=0.5 + rng.random(d),
                   pool=pool, groups=2, w_a=rng.normal(size=(2 * 3, heads * d // 2)),
                   w_b=rng.normal(size=(d_model, 2 * 3)), index=index)
    out = dict(q=None, k=None, v=None, compressed=section, mask=allowed)
    return {**out, "sinks": rng.normal(size=heads)} if sinks else out
