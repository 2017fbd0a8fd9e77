"""The classroom exercise worked by hand, cell by cell, and the tracer checked against it.

Columns layout: one column per token, Q = W_Q·X, S = KᵀQ (one row per key, one column per query).
"""
from fractions import Fraction as F

import numpy as np
import pytest

import tracer

X = [[2, 0, 0, 2], [0, 1, 0, 0], [0, 2, 1, 0], [0, 0, 1, 1], [2, 0, 0, 0], [1, 0, 1, 1]]

# W_Q rows pick x[0]+x[1], x[1]+x[3], x[2]+x[4]+x[5] of each column:
#   q1 = (2, 0, 3), q2 = (1, 1, 2), q3 = (0, 1, 2), q4 = (2, 1, 1)
Q = [[2, 1, 0, 2],
     [0, 1, 1, 1],
     [3, 2, 2, 1]]
# W_K rows pick x[2], x[1], x[0] − x[5]:  k1 = (0, 0, 1), k2 = (2, 1, 0), k3 = (1, 0, −1), k4 = (0, 0, 1)
K = [[0, 2, 1, 0],
     [0, 1, 0, 0],
     [1, 0, -1, 1]]
# W_V rows pick 10·x[0], 10·x[3], 10·x[1]:  v1 = (20, 0, 0), v2 = (0, 0, 10), v3 = (0, 10, 0), v4 = (20, 10, 0)
V = [[20, 0, 0, 20],
     [0, 0, 10, 10],
     [0, 10, 0, 0]]
# KᵀQ, row = key, column = query: e.g. k2·q4 = 2×2 + 1×1 + 0×1 = 5, k3·q3 = 0 + 0 − 2 = −2
S = [[3, 2, 2, 1],
     [4, 3, 1, 5],
     [-1, -1, -2, 1],
     [3, 2, 2, 1]]
# ⌊S ÷ 2⌋ (÷2 stands in for ÷√3): ⌊−1/2⌋ = −1, ⌊1/2⌋ = 0, ⌊5/2⌋ = 2
FLOOR = [[1, 1, 1, 0],
         [2, 1, 0, 2],
         [-1, -1, -1, 0],
         [1, 1, 1, 0]]
# 3 to the power of each cell
POW = [[F(3), F(3), F(3), F(1)],
       [F(9), F(3), F(1), F(9)],
       [F(1, 3), F(1, 3), F(1, 3), F(1)],
       [F(3), F(3), F(3), F(1)]]
# column sums: 3 + 9 + 1/3 + 3 = 46/3, 3 + 3 + 1/3 + 3 = 28/3, 3 + 1 + 1/3 + 3 = 22/3, 1 + 9 + 1 + 1 = 12
SUMS = [[F(46, 3), F(28, 3), F(22, 3), F(12)]]
# each power over its column's sum: 9 ÷ (46/3) = 27/46, 1/3 ÷ (28/3) = 1/28, 9 ÷ 12 = 3/4
A = [[F(9, 46), F(9, 28), F(9, 22), F(1, 12)],
     [F(27, 46), F(9, 28), F(3, 22), F(3, 4)],
     [F(1, 46), F(1, 28), F(1, 22), F(1, 12)],
     [F(9, 46), F(9, 28), F(9, 22), F(1, 12)]]
# Z = V·A: z1 = 9/46·v1 + 27/46·v2 + 1/46·v3 + 9/46·v4 = (360/46, 100/46, 270/46), and so on
Z = [[F(180, 23), F(90, 7), F(180, 11), F(10, 3)],
     [F(50, 23), F(25, 7), F(50, 11), F(5, 3)],
     [F(135, 23), F(45, 14), F(15, 11), F(15, 2)]]

BY_HAND = {"x": X, "h0.q": Q, "h0.k": K, "h0.v": V, "h0.scores": S, "h0.scaled": FLOOR, "h0.exp": POW,
           "h0.sums": SUMS, "h0.weights": A, "h0.z": Z}


def test_hand_work_is_consistent():
    """The worked numbers agree among themselves (a check on the pencil work, not on the tracer)."""
    assert all(sum(A[k][q] for k in range(4)) == 1 for q in range(4))
    for q in range(4):
        for k in range(4):
            assert A[k][q] == POW[k][q] / SUMS[0][q] and POW[k][q] == F(3) ** FLOOR[k][q]
    for d in range(3):
        for q in range(4):
            assert Z[d][q] == sum(V[d][k] * A[k][q] for k in range(4))


def test_by_hand_arithmetic_cell_by_cell():
    trace = tracer.run("by_hand")  # the scenario's default arithmetic: by-hand
    assert trace.layout == "columns" and trace.arithmetic.preset == "by-hand"
    assert [s.id for s in trace.steps] == list(BY_HAND)
    for step_id, hand in BY_HAND.items():
        got = trace[step_id]
        assert got.shape == (len(hand), len(hand[0])), step_id
        for r, row in enumerate(hand):
            for c, want in enumerate(row):
                assert got[r, c] == pytest.approx(float(want), rel=1e-14, abs=0), f"{step_id}[{r}, {c}]"


def test_by_hand_explanations_show_the_exact_fractions():
    trace = tracer.run("by_hand")
    for step_id in ("h0.exp", "h0.sums", "h0.weights", "h0.z"):
        for r, row in enumerate(BY_HAND[step_id]):
            for c, want in enumerate(row):
                shown = trace.explain(step_id, r, c).split("   (")[0].rsplit(" = ", 1)[1]
                assert F(shown.split(" ≈ ")[0]) == want, (step_id, r, c, shown)


def test_exact_arithmetic_cell_by_cell():
    """÷√3 and eˣ, from the hand-derived Q, K and V (not from the tracer)."""
    q, k, v = (np.array(m, dtype=float) for m in (Q, K, V))
    s = k.T @ q
    scaled = s / np.sqrt(3)
    powers = np.exp(scaled - scaled.max(axis=0))  # each query (column) shifted by its max
    sums = powers.sum(axis=0, keepdims=True)
    a = powers / sums
    want = {"x": np.array(X, dtype=float), "h0.q": q, "h0.k": k, "h0.v": v, "h0.scores": s,
            "h0.scaled": scaled, "h0.exp": powers, "h0.sums": sums, "h0.weights": a, "h0.z": v @ a}
    trace = tracer.run("by_hand", "exact")
    assert [s.id for s in trace.steps] == list(want)
    for step_id, m in want.items():
        np.testing.assert_allclose(trace[step_id], m, rtol=1e-12, atol=1e-12, err_msg=step_id)
