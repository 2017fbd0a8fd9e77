"""A DeepSeek V4 layer's numbers in a trace: its parts before the heads (c_q, the pooled entries, the
index scores and choice; the streams' mixes given), each head's queries and the key/value head, the stage kernels' `attend` (scores … weights,
the sink, z over the n + E keys), z turned back, and the grouped output projection and the streams
after them."""
from __future__ import annotations

import numpy as np

from ..indexer import rotary, scores, topk
from . import attention, pool, streams


def inputs(run, before: dict) -> dict:
    """hc.pre, q_a and c_q (from norm_in, among the steps `before`, or x), the pooled entries, the
    indexer's scores and choice over them, and the streams with the hyper-connection's post and comb."""
    c, dt = run.scenario.compressed, run.dtype
    h = before.get("norm_in", run.x)
    q_a = h @ c["w_qa"]
    got = {"hc.pre": c["pre"], "q_a": q_a, "c_q": rms(q_a, c["eps"]) * c["q_gain"]}
    if c["x_streams"] is not None:   # the streams, and how the hyper-connection gives the output back
        got.update({"streams": c["x_streams"], "hc.post": c["post"], "hc.comb": c["comb"].reshape(-1, c["streams"])})
    if c["entries"]:   # the pooled entries, from the tokens' C and Z
        got.update(pooled(c, h))
        if c["index"] is not None:   # the indexer's votes over the complete entries, and each query's top k
            got.update(index(c, len(q_a)))
    return {sid: np.ascontiguousarray(a, dtype=dt) for sid, a in got.items()}


def pooled(c: dict, h: np.ndarray) -> dict:
    """pool.c and pool.z (the tokens' projections), pool.weights (a softmax over each entry's slots of Z + B,
    feature by feature), pool.sum (Σ_s W ⊙ C), pool.norm (RMS-normed with its gain), pool.k (turned at
    each entry's first token)."""
    p = c["pool"]
    got = {"pool.c": h @ p["w_c"], "pool.z": h @ p["w_z"]}
    total, weights = pool.pool(got["pool.c"], got["pool.z"], p["bias"], c["m"], c["overlap"])
    got.update({"pool.weights": pool.stacked(weights), "pool.sum": total})
    got["pool.norm"] = rms(total, c["eps"]) * p["gain"]
    got["pool.k"] = rotary.turn(got["pool.norm"], p["theta"], "interleaved", "last")
    return got


def rms(a: np.ndarray, eps: float) -> np.ndarray:
    """a's rows over their root mean square (RMS norm without a gain)."""
    return a / np.sqrt(np.mean(a * a, axis=-1, keepdims=True) + eps)


def key_values(run, ids: dict) -> dict:
    """The one key/value head: the tokens' keys (N·W_KV, normed with its gain, turned), then the entries."""
    c = run.scenario.compressed
    kv = run.held(run.step(ids["kv"]).inputs[0]) @ c["w_kv"]
    kv_norm = rms(kv, c["eps"]) * c["kv_gain"]
    kv_rot = rotary.turn(kv_norm, c["theta"], "interleaved", "last")
    entries = run.held("pool.k") if c["entries"] else np.zeros((0, kv.shape[1]))
    got = {"kv": kv, "kv_norm": kv_norm, "kv_rot": kv_rot, "k": np.concatenate([kv_rot, entries])}
    got = {kind: np.ascontiguousarray(a, dtype=run.dtype) for kind, a in got.items()}
    return {**got, "v": got["k"]}


def head(run, h: int, K, ids: dict, allowed, bias, rule, attend_kinds) -> tuple[dict, bool]:
    """Head h's steps: its queries (c_q·W_QB, normed without a gain, turned), the keys (= values),
    attend's steps, z turned back."""
    sc, dt, c = run.scenario, run.dtype, run.scenario.compressed
    q = run.held("c_q") @ c["w_qb"][h]
    q_norm = rms(q, c["eps"])
    got = {"q": q, "q_norm": q_norm, "q_rot": rotary.turn(q_norm, c["theta"], "interleaved", "last")}
    got = {kind: np.ascontiguousarray(a, dtype=dt) for kind, a in got.items()}
    got.update(key_values(run, ids))
    *arrays, finite = K.attend(got["q_rot"], got["k"], got["v"], allowed, bias, rule)
    got.update(zip(attend_kinds, arrays))
    got["z_rot"] = got.pop("z")
    got["z"] = np.ascontiguousarray(rotary.turn(got["z_rot"], -sc.compressed["theta"], "interleaved", "last"), dtype=dt)
    return {ids[kind]: a for kind, a in got.items() if kind in ids}, finite


def output(run, y: np.ndarray) -> dict:
    """o_groups and out from the heads' outputs side by side, and the streams after them."""
    c = run.scenario.compressed
    groups, out = attention.grouped_output(y.astype(np.float64), c["w_a"], c["w_b"], c["groups"])
    got = {"o_groups": groups, "out": out}
    if c["x_streams"] is not None:   # the streams after the attention, in place of a residual
        got["streams_after"] = streams.after(c, out)
    return {sid: a.astype(run.dtype) for sid, a in got.items()}


def index(c: dict, n: int) -> dict:
    """idx.q, idx.k, idx.w as given, then idx.scores (−∞ on the entries not complete) and idx.selected."""
    ix, entries = c["index"], c["entries"]
    q = ix["q"].reshape(n, ix["w"].shape[1], -1)
    s = scores.index_scores(q, ix["k"], ix["w"], ix["scale"], pool.visible(n, entries, c["m"]))
    return {"idx.q": ix["q"], "idx.k": ix["k"], "idx.w": ix["w"], "idx.scores": s,
            "idx.selected": topk.select(s, c["topk"])}


def dropped(trace) -> np.ndarray | None:
    """query × key, True on the complete entries the indexer dropped (None without an indexer)."""
    if "idx.selected" not in trace:
        return None
    index = trace.rows("idx.scores")
    entries = np.isfinite(index) & (trace.rows("idx.selected") == 0)
    return np.concatenate([np.zeros((len(index), len(index)), bool), entries], axis=1)


def kept_words(trace, i: int) -> str:
    """`query sat kept 2 of 3 entries (top-2)`, "" without an indexer."""
    if "idx.selected" not in trace:
        return ""
    from ...labels import token_name
    seen, kept = int(np.isfinite(trace.rows("idx.scores")[i]).sum()), int(trace.rows("idx.selected")[i].sum())
    top = trace.scenario.compressed["topk"]
    return f"query {token_name(trace.scenario.tokens, i)} kept {kept} of {seen} entries (top-{top})"


def dropped_cells(trace, step) -> np.ndarray | None:
    """dropped() on a head's query × key steps, in the trace's layout (the declaration's `dropped`)."""
    from ..indexer.compute import DROPPABLE
    if step.head is None or step.kind not in DROPPABLE:
        return None
    if "dropped" not in trace.memo:   # asked on every step the TUI shows: built once a trace
        cells = dropped(trace)
        trace.memo["dropped"] = None if cells is None else cells.T if trace.columns else cells
    return trace.memo["dropped"]


def chosen_words(trace, step, row: int, col: int) -> str | None:
    """kept_words() of the query under a cursor on a query × key step (the declaration's `chosen`)."""
    if step.axes not in (("query", "key"), ("key", "query")):
        return None
    return kept_words(trace, col if trace.columns else row) or None
