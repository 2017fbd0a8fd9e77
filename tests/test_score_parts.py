"""Why this weight: a score cell's explanation lists its exact parts, one per feature (q_i·k_i) or,
for rotated queries and keys, one per rotary pair (and one per feature past the rotated ones),
summing to the cell; with many parts, the largest first and the rest summed."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

import tracer
from tracer.score_parts import parts


def _number(text: str) -> float:
    return float(text.replace("−", "-"))


def _values(text: str) -> list[float]:
    """The parts' values as written after the products: `… = v1 + v2 = value   (…)`."""
    body = text.split("   (")[0]
    return [_number(v) for v in body.rsplit(" = ", 2)[1].split(" + ")]


def test_a_rotated_score_is_one_part_per_pair():
    """rope: d_k 4 in the half style, so the pairs are features (0, 2) and (1, 3)."""
    t = tracer.run("rope", dtype="float64")
    q, k = t["h0.q_rot"], t["h0.k_rot"]
    for i, j in ((2, 1), (4, 0), (3, 3)):
        text = t.explain("h0.scores", i, j)
        want = [q[i, 0] * k[j, 0] + q[i, 2] * k[j, 2], q[i, 1] * k[j, 1] + q[i, 3] * k[j, 3]]
        got = _values(text)
        assert got == pytest.approx(want, rel=5e-4, abs=5e-5), text
        assert _number(text.split("   (")[0].rsplit(" = ", 1)[1]) == pytest.approx(sum(want), rel=5e-4)
        assert "one part per rotary pair" in text
    exact = parts(q[2], k[1], t.scenario.rope)
    assert [p[1] for p in exact] == [[0, 2], [1, 3]]
    assert math.fsum(p[2] for p in exact) == pytest.approx(t["h0.scores"][2, 1], rel=1e-14)


def test_many_features_list_the_largest_and_sum_the_rest():
    """gpt2_small: 64 features a head; the six largest products, largest first, then the rest's sum."""
    t = tracer.run("gpt2_small", dtype="float64")
    step = t.step("h3.scores")
    q, k = t.rows(step.inputs[0])[5], t.rows(step.inputs[1])[2]
    text = t.explain("h3.scores", 5, 2)
    products = q * k
    order = np.argsort(-np.abs(products), kind="stable")
    named = [int(n) for n in re.findall(r"\(feature (\d+):", text)]
    assert named == [int(n) for n in order[:6]], text
    rest = re.search(r"\(58 more parts, summing to (\S+)\)", text)
    assert rest and _number(rest.group(1)) == pytest.approx(products[order[6:]].sum(), rel=5e-4, abs=1e-6)
    shown = [_number(v) for v in re.findall(r"(\S+) \(feature \d+:", text)]
    assert shown == pytest.approx(products[order[:6]], rel=5e-4)
    assert math.fsum(p[2] for p in parts(q, k, None)) == pytest.approx(t["h3.scores"][5, 2], rel=1e-12)


def test_partial_rotary_pairs_then_the_features_that_do_not_turn():
    """d_k 24 of which the first 16 rotate (pairs (i, i + 8)): 8 pair parts and 8 feature parts."""
    rng = np.random.default_rng(4)
    sc = tracer.from_arrays(x=rng.normal(size=(5, 6)), q=rng.normal(size=(6, 24)), k=rng.normal(size=(6, 24)),
                            v=rng.normal(size=(6, 3)), rope=dict(base=100.0, style="half", dims=16), mask="causal")
    t = tracer.run(sc)
    q, k = t["h0.q_rot"][4], t["h0.k_rot"][1]
    found = parts(q, k, t.scenario.rope)
    assert [p[0] for p in found] == [f"pair {i}" for i in range(8)] + [f"feature {i}" for i in range(16, 24)]
    for i in range(8):
        assert found[i][2] == pytest.approx(q[i] * k[i] + q[i + 8] * k[i + 8], rel=1e-14)
    assert math.fsum(p[2] for p in found) == pytest.approx(t["h0.scores"][4, 1], rel=1e-12)
    text = t.explain("h0.scores", 4, 1)
    assert "(10 more parts, summing to" in text and "6 largest of 16" in text, text


def test_few_unrotated_features_keep_the_worksheet_form():
    assert tracer.run("by_hand").explain("h0.scores", 1, 2) == \
        "h0.scores[key x2, query x3] = k(x2)·q(x3) = 2×0 + 1×1 + 0×2 = 1"
