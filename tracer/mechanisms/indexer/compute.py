"""The lightning indexer's numbers for a trace, computed once before the heads: its queries, key,
head weights, scores and choice (scores.py and topk.py, or the compiled kernel for a large one; in
float64 whatever the run's dtype: the choice must not depend on rounding). The trace's allowed
matrix hides the keys it dropped from every head. Also what the readers ask of the choice: the
cells a head's step drops (the TUI, the pictures), a query's count, the ties, a class sheet's fitness."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import scores, topk

LARGE = 1 << 22   # index heads · n² from which the compiled kernel scores and chooses (NumPy below)


class Shape(NamedTuple):
    """What a plan depends on of an indexer (Dims.of("indexer"))."""
    heads: int          # index heads H_I (0: a shared layer's, which has none)
    d_index: int        # d_I
    weighted: bool      # idx.w is a step (W_w given, or a checkpoint's head weights)
    mode: str           # "weights" (written by hand), "given" (a checkpoint's), "shared"
    rope_dims: int      # a checkpoint's turned features (0: none)
    rope_style: str     # their pairs: "half" or "interleaved"


def shape(spec: dict) -> Shape:
    rope = spec["rope"] or {}
    return Shape(spec["heads"], spec["d_index"], spec["w_iw"] is not None or spec["given"], mode(spec),
                 rope.get("dims", 0), rope.get("style", ""))


def k_of(trace) -> int:
    """The keys each query keeps: `--set topk=K` (the run's arithmetic), else the scenario's."""
    return trace.arithmetic.topk or trace.scenario.sparse["topk"]


def mode(spec: dict) -> str:
    """How the indexer's inputs came: "weights" (written by hand), "given" (a checkpoint's), "shared"."""
    return "shared" if spec["shared"] is not None else "given" if spec["given"] else "weights"


def arrays(x: np.ndarray, spec: dict, k: int) -> dict:
    """idx.q, idx.k, idx.w (when the scenario has W_w, or a checkpoint's), idx.scores and idx.selected
    (0/1), by id; x is what the layer's projections read."""
    n = x.shape[0]
    if spec["shared"] is not None:   # no indexer of its own: the choice of the layer before
        return {"idx.selected": spec["shared"]["selected"].astype(np.float64)}
    if spec["given"]:   # a checkpoint's indexer: its queries, key and weights as its blocks computed them
        q, key, w = (spec["arrays"][sid] for sid in ("idx.q", "idx.k", "idx.w"))
    else:
        q, key = x @ spec["w_iq"], x @ spec["w_ik"]
        w = np.ones((n, 1)) if spec["w_iw"] is None else x @ spec["w_iw"]
    q3 = q.reshape(n, spec["heads"], spec["d_index"])
    if spec["heads"] * n * n < LARGE:
        index = scores.index_scores(q3, key, w, spec["scale"], scores.causal(n))
        keep = topk.select(index, k)
    else:   # compiled, a block of queries at a time: no index heads × n × n array (kernels/indexer.py)
        from ...kernels import indexer as kernel
        c = np.ascontiguousarray
        index, chosen = kernel.index_topk(c(q3), c(key), c(w), np.arange(1, n + 1), k, spec["scale"], True)
        keep = kernel.selected(chosen, n)
    got = {"idx.q": q, "idx.k": key, "idx.scores": index, "idx.selected": keep.astype(np.float64)}
    if spec["w_iw"] is not None or spec["given"]:
        got["idx.w"] = w
    return got


def source(present) -> str:
    """What the indexer reads: the normed input when the layer has a norm_in, else x."""
    return "norm_in" if "norm_in" in present else "x"


def inputs(run, got: dict) -> dict:
    """The indexer's steps in the run's dtype (its choice made in float64); `got`: the input steps
    computed before it (norm_in)."""
    x = np.asarray(got.get("norm_in", run.x), dtype=np.float64)
    spec = run.scenario.sparse
    return {sid: np.ascontiguousarray(a, dtype=run.dtype) for sid, a in arrays(x, spec, k_of(run)).items()}


def row_parts(trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q as token × heads × d_I, k, w) in float64, for the explanations."""
    sp = trace.scenario.sparse
    q = trace.rows("idx.q").astype(np.float64).reshape(trace.scenario.n, sp["heads"], sp["d_index"])
    w = trace.rows("idx.w").astype(np.float64) if "idx.w" in trace else np.ones((trace.scenario.n, 1))
    return q, trace.rows("idx.k").astype(np.float64), w


def ties(trace) -> list[str]:
    """The queries whose k-th and (k+1)-th best index scores are equal (their choice keeps the
    earlier key, where torch.topk's order is unspecified)."""
    index = trace.rows("idx.scores").astype(np.float64)
    from ...labels import token_name
    return [token_name(trace.scenario.tokens, i) for i in np.flatnonzero(topk.ties(index, k_of(trace)))]


def unsettled(trace) -> int:
    """How far a classroom sheet is from one the indexer teaches on: the queries with a tie at the
    k-th best (their answer would rest on how ties are broken), plus 1 when no query drops a key it
    could see (nothing to compare with dense attention)."""
    if "idx.scores" not in trace:
        return 0
    index, kept = trace.rows("idx.scores").astype(np.float64), trace.rows("idx.selected") != 0
    drops = (np.isfinite(index) & ~kept).any()
    return int(topk.ties(index, k_of(trace)).sum()) + (0 if drops else 1)


DROPPABLE = ("scores", "scaled", "capped", "biased", "masked", "exp", "weights")   # a head's query × key steps


def dropped_cells(trace, step) -> np.ndarray | None:
    """Where a head's query × key step has a key the causal mask lets the query see but the indexer
    dropped, in the trace's layout (what a view dims); None for other steps (the declaration's
    `dropped`)."""
    if step.head is None or step.kind not in DROPPABLE:
        return None
    if "dropped" not in trace.memo:   # asked on every step the TUI shows: n × n, built once a trace
        selected = trace.rows("idx.selected") != 0
        dropped = np.tri(*selected.shape, dtype=bool) & ~selected
        trace.memo["dropped"] = dropped.T if trace.columns else dropped
    return trace.memo["dropped"]


def kept_words(trace, step, row: int, col: int) -> str | None:
    """`query sat kept 2 of 4 keys (top-2)`: the choice of the query under a cursor on a head's
    query × key step or the indexer's own (row, col in the layout); None elsewhere (the
    declaration's `chosen`)."""
    if step.axes not in (("query", "key"), ("key", "query")):
        return None
    i = col if trace.columns else row
    selected = trace.rows("idx.selected")[i] != 0
    from ...labels import token_name
    return (f"query {token_name(trace.scenario.tokens, i)} kept {int(selected.sum())} of {i + 1} keys "
            f"(top-{k_of(trace)})")
