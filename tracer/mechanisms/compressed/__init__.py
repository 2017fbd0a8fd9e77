"""DeepSeek V4's compressed attention: besides a sliding window over the tokens, each query reads a
pool of compressed entries, each a learned softmax pooling of m tokens (`pool`), through one
key/value head with sinks, its output turned back and projected group by group (`attention`).

In a trace (`compressed` keyword of from_arrays, filled from a checkpoint by
models/deepseek_v4_layer.py; `reader`, which also builds the mask): the streams and their mixes and
the indexer's q, k and w enter as given (`before`, `streams`); the engine computes the pooled
entries (`entries`), c_q and each head's queries, the key/value head from norm_in, the index
scores and choice, then every head's steps over the n + E keys, z turned back, the grouped W_O and
the streams after it (`compute`, `steps`)."""
from __future__ import annotations

from ..declaration import Mechanism
from . import steps, streams, entries  # noqa: F401  (streams, entries: their kinds)
from . import compute  # noqa: E402  (after the kinds it reads are registered)
from .reader import read


def _describe(sc) -> dict:
    c = sc.compressed
    out = {"kind": c["kind"], "window": c["window"], "entries": c["entries"], "streams": c["streams"],
           "x": f"x = Σ_j pre_j·X_j over {c['streams']} streams"}
    if c["m"] is not None:
        out["m"] = c["m"]
    if c["topk"] is not None:
        out["topk"] = c["topk"]
    return out


def _given(trace) -> list:
    """W_a and W_b (the grouped output projection), for the exports."""
    c = trace.scenario.compressed
    return [("compressed.w_a", ("group_feature", "heads·d_v"), c["w_a"]),
            ("compressed.w_b", ("d_model", "group_feature"), c["w_b"])]


def _projections(trace) -> list:
    """What the heads read in place of W_Q, W_K and W_V: each head's W_QB (its queries read c_q, a
    step), W_KV (the one key/value head) and its norm's gain."""
    c, orient = trace.scenario.compressed, (lambda a: a.T) if trace.columns else (lambda a: a)
    w_kv, w_qb = ("d_k", "d_model"), ("d_k", "q_rank")
    rows = (lambda axes: axes) if trace.columns else (lambda axes: axes[::-1])  # noqa: E731
    return [(f"compressed.w_qb[{h}]", rows(w_qb), orient(w)) for h, w in enumerate(c["w_qb"])] + [
        ("compressed.w_kv", rows(w_kv), orient(c["w_kv"])),
        ("compressed.kv_gain", ("one", "d_k"), c["kv_gain"][None, :])]


# DeepSeek V4's layer ([compressed], from_arrays' `compressed`): queries, keys over tokens then entries,
# the indexer's choice; its mask is the scenario's (window, entries complete, entries kept)
DECLARATION = Mechanism(
    "compressed", "DeepSeek V4's compressed attention", field="compressed", label="[compressed]",
    keys=("compressed",), arguments={"compressed": "compressed"}, read=read,
    dims=lambda sc: steps.shape(sc.compressed), describe=_describe, given=_given, projections=_projections,
    symbols={"compressed.w_a": "W_a", "compressed.w_b": "W_b", "compressed.w_kv": "W_KV",
             "compressed.kv_gain": "g (keys)",
             "compressed.w_qb": "W_QB"},
    fused=False, online=False, decode=False, dropped=compute.dropped_cells, chosen=compute.chosen_words,
    texts={"masked.formula": steps.masked_formula, "masked.explain": steps.hidden})
