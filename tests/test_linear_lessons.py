"""The numbers of the planned built-in lessons, worked in Fractions: `linear_decay` (the decay rule
with α = 1/2 and 1/3 on five copies of one word, ALiBi's example) and `gated_attention` (a softmax
head whose output is gated by σ₃(x·W_G) under the by-hand preset). `delta_rule`'s are pinned in
test_linear_formula.py. The references here are written apart from the code: plain loops on Fractions."""
from __future__ import annotations

from fractions import Fraction as F

import numpy as np

from tracer.mechanisms.linear.gates import output_gate
from tracer.mechanisms.linear.formula import implicit, recur


def _column(values) -> np.ndarray:
    return np.array([[F(x)] for x in values], dtype=object)


def test_linear_decay_halves_and_thirds_and_normalised_is_alibi():
    ones = _column([1] * 5)
    for a, states in ((F(1, 2), [1, F(3, 2), F(7, 4), F(15, 8), F(31, 16)]),
                      (F(1, 3), [1, F(4, 3), F(13, 9), F(40, 27), F(121, 81)])):
        S, o = recur(ones, ones, ones, _column([a] * 5), None, "decay")
        A = implicit(ones, ones, _column([a] * 5), None, "decay")
        assert S.ravel().tolist() == states and o.ravel().tolist() == states
        assert A[4].tolist() == [a ** (4 - s) for s in range(5)] and sum(A[4]) == states[4]
        if a == F(1, 3):   # ALiBi, slope 1, base 3: powers 3^−(4 − j), divided by their sum
            powers = [F(3) ** -(4 - j) for j in range(5)]
            assert [w / sum(A[4]) for w in A[4]] == [p / sum(powers) for p in powers] == \
                [F(1, 121), F(3, 121), F(9, 121), F(27, 121), F(81, 121)]


def test_gated_attention_by_hand():
    x = [[1, 0, 1], [0, 1, 1], [1, 1, 0]]
    q = [r[:2] for r in x]                                    # W_Q = W_K: the first two features
    v = [[2 * r[0] + r[2], 2 * r[1] + r[2]] for r in x]       # W_V = [[2, 0], [0, 2], [1, 1]]
    logits = [[r[0] - r[2], r[1] - r[0]] for r in x]          # W_G = [[1, −1], [0, 1], [−1, 0]]
    z = []
    for i in range(3):
        powers = [F(3) ** (q[i][0] * q[j][0] + q[i][1] * q[j][1]) for j in range(i + 1)]   # ⌊s ÷ 1⌋ = s
        w = [p / sum(powers) for p in powers]
        z.append([sum(w[j] * v[j][c] for j in range(i + 1)) for c in range(2)])
    assert z == [[3, 1], [F(3, 2), F(5, 2)], [2, 2]]
    gate, gated = output_gate(np.array(z, dtype=float), np.array(logits, dtype=float), base=3)
    assert gate.tolist() == [[0.5, 0.25], [0.25, 0.75], [0.75, 0.5]]
    assert gated.tolist() == [[1.5, 0.25], [0.375, 1.875], [1.5, 1.0]]   # 3/2, 1/4; 3/8, 15/8; 3/2, 1
