"""The built-in lesson `sparse_topk` (4 tokens, top-2, by hand): its scenario file's numbers, every
one its description states worked with Python Fractions, and the formula modules
(tracer/mechanisms/indexer) choosing the same keys and giving the same weights."""
from __future__ import annotations

import tomllib
from fractions import Fraction as F
from pathlib import Path

import numpy as np

from tracer.mechanisms.indexer import scores, topk

SCENARIO = (Path(__file__).parents[1] / "scenarios" / "sparse_topk.toml").read_text(encoding="utf-8")
LESSON = tomllib.loads(SCENARIO)
N = 4


def _mat(rows):
    return [[F(v) for v in row] for row in rows]


def _mul(a, b):
    return [[sum(a[i][t] * b[t][j] for t in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]


def worked(lesson: dict = LESSON) -> dict:
    """Every step by hand, in Fractions: the indexer (one head), the choice, the head's 3^x
    softmax (by-hand: ⌊s ÷ round(√1)⌋ = s) over the kept keys, and dense attention beside it
    (`lesson`: the scenario file's document, or a classroom sheet's with the same shapes)."""
    w, x, k_top = lesson["weights"], _mat(lesson["x"]), lesson["sparse"]["topk"]
    iq, ik, iw = (_mul(x, _mat(w[name])) for name in ("index_q", "index_k", "index_w"))
    index = [[iw[t][0] * max(iq[t][0] * ik[s][0], F(0)) if s <= t else None for s in range(N)] for t in range(N)]
    keep = []
    for t in range(N):
        ranked = sorted(range(t + 1), key=lambda s: (-index[t][s], s))
        keep.append(set(ranked[:k_top]))
    q, k, v = (_mul(x, _mat(w[name])) for name in ("q", "k", "v"))
    s = [[q[t][0] * k[j][0] for j in range(N)] for t in range(N)]

    def softmax(t, keys):
        powers = {j: F(3) ** int(s[t][j]) for j in keys}
        total = sum(powers.values())
        return [powers[j] / total if j in keys else F(0) for j in range(N)]
    sparse = [softmax(t, keep[t]) for t in range(N)]
    dense = [softmax(t, set(range(t + 1))) for t in range(N)]
    z = [[sum(sparse[t][j] * v[j][c] for j in range(N)) for c in range(2)] for t in range(N)]
    return dict(index=index, keep=keep, sparse=sparse, dense=dense, z=z, idx=(iq, ik, iw))


def test_the_numbers_the_lesson_states():
    got = worked()
    sat, cat = 3, 2
    assert got["idx"][0][sat][0] * got["idx"][1][sat][0] == -1          # ReLU(−1) = 0: its own key
    assert got["index"][sat] == [1, 0, 2, 0] and got["index"][cat] == [1, 0, 2, None]
    assert got["keep"] == [{0}, {0, 1}, {0, 2}, {0, 2}]
    assert got["dense"][sat] == [F(1, 12), F(1, 12), F(9, 12), F(1, 12)]
    assert got["sparse"][sat] == [F(1, 10), 0, F(9, 10), 0]
    assert sum(got["dense"][sat][j] for j in got["keep"][sat]) == F(10, 12)
    assert all(got["sparse"][sat][j] == got["dense"][sat][j] * F(12, 10) for j in got["keep"][sat])
    assert got["dense"][cat] == [F(1, 3)] * 3 + [0] and got["sparse"][cat] == [F(1, 2), 0, F(1, 2), 0]
    assert got["sparse"][:2] == got["dense"][:2]                        # k ≥ what they see: dense
    assert got["z"][sat] == [F(1, 10), 1] and got["z"][cat] == [F(1, 2), 1]


def test_no_tie_at_the_bar():
    """The lesson's choices never rest on how ties are broken."""
    index = worked()["index"]
    for t in range(N):
        ranked = sorted((index[t][s] for s in range(t + 1)), reverse=True)
        assert len(ranked) <= 2 or ranked[1] > ranked[2]


def test_the_formula_modules_agree():
    w, x = LESSON["weights"], np.array(LESSON["x"], float)
    q = (x @ np.array(w["index_q"], float))[:, None, :]
    s = scores.index_scores(q, x @ np.array(w["index_k"], float), x @ np.array(w["index_w"], float), 1.0,
                            scores.causal(N))
    keep = topk.select(s, LESSON["sparse"]["topk"])
    got = worked()
    assert [set(np.flatnonzero(row)) for row in keep] == got["keep"]
    np.testing.assert_array_equal(np.where(np.isfinite(s), s, -1),
                                  [[-1 if v is None else float(v) for v in row] for row in got["index"]])
    assert scores.story(q, x @ np.array(w["index_k"], float), x @ np.array(w["index_w"], float), 1.0, 3, 3,
                        lambda v: f"{v:g}") == ("= 1·ReLU(-1) = 0 = 0   (index head 0 disagrees: cut to 0, not a vote "
                                                "against)")
    assert topk.reason(s, keep, 2, 3, 1) == ("dropped: index score 0 ranks 3 of 4, below the 2nd best, 1; "
                                             "its weight is 0 in every head")
