"""ALiBi (BLOOM, some Falcons; mechanisms/alibi.py): the slopes of Press et al. and of BLOOM's
build_alibi_tensor, the weights BLOOM gives, the lesson's numbers, and its texts: h{h}.biased keeps
the contract's scaled − m_h·(i − j) for every key (a later key gains; BLOOM adds m_h·j to every score,
the same weights with or without a mask), its story says when the mask removes such a key next, and
by-hand weights are fractions however large the denominator a sheet meets (6561/7381, not 0.8889)."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import tracer
from tui.cli import main


def fractions(trace, sid: str, row: int) -> list[Fraction]:
    return [Fraction(float(v)).limit_denominator(1000) for v in trace.rows(sid)[row]]


def test_alibi_slopes_of_the_paper_for_8_heads():
    slopes = tracer.alibi_slopes(8)
    assert [Fraction(float(m)) for m in slopes] == [Fraction(1, 2 ** h) for h in range(1, 9)]   # 1/2 … 1/256


def test_alibi_slopes_for_counts_that_are_not_powers_of_two_interleave():
    # 12 heads: the 8 slopes of 8 heads, then every other slope of 16 heads' (2^−0.5, 2^−1.5, 2^−2.5, 2^−3.5)
    want = [2.0 ** -h for h in range(1, 9)] + [2.0 ** -(h + 0.5) for h in range(0, 4)]
    np.testing.assert_allclose(tracer.alibi_slopes(12), want, rtol=1e-15)
    assert list(tracer.alibi_slopes(1)) == [2.0 ** -8]


@pytest.mark.parametrize("heads", [1, 2, 3, 4, 5, 6, 8, 12, 16, 20, 32, 40, 112])
def test_alibi_slopes_equal_bloom_build_alibi_tensor(heads):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    bias = build_alibi_tensor(torch.ones(1, 3), heads, torch.float64)   # heads × 1 × keys: slope·j
    np.testing.assert_allclose(tracer.alibi_slopes(heads), bias[:, 0, 1].numpy(), rtol=1e-6)


def test_biased_scores_give_the_weights_bloom_gives():
    """BLOOM adds slope·j (a constant per query, as the contract says); ours subtract slope·(i − j):
    the same weights under a causal mask."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(5, 4)), [rng.normal(size=(4, 2)) for _ in range(4)]
    trace = tracer.run(tracer.from_arrays(x, w, w, w, mask="causal", alibi=True))
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    bias = build_alibi_tensor(torch.ones(1, 5), 4, torch.float64)[:, 0, :].numpy()
    for h in range(4):
        q = x @ w[h]
        s = q @ q.T / math.sqrt(2) + bias[h][None, :]
        s = np.where(np.tril(np.ones((5, 5), bool)), s, -np.inf)
        e = np.exp(s - s.max(1, keepdims=True))
        np.testing.assert_allclose(trace[f"h{h}.weights"], e / e.sum(1, keepdims=True), rtol=1e-12, atol=1e-15)


def test_alibi_lesson():
    t = tracer.run("alibi")   # by-hand: five equal words, slopes 2 and 1
    assert fractions(t, "h1.weights", 4) == [Fraction(3 ** k, 121) for k in range(5)]
    assert fractions(t, "h0.weights", 3)[:4] == [Fraction(9 ** k, 820) for k in range(4)]
    assert t.rows("h0.biased")[4, 0] == t.rows("h0.scaled")[4, 0] - 2 * 4
    assert "2 − 1·(4 − 1) = 2 − 3 = −1" in t.explain("h1.biased", 4, 1)


SLOPES = (2, 1)   # the alibi built-in's


def by_hand_weights(head: int) -> list[list[Fraction]]:
    """alibi by hand: every score 4, ⌊4 ÷ 2⌋ = 2, minus m·(i − j), 3^s over the keys j ≤ i."""
    m, n = SLOPES[head], 5
    powers = [[Fraction(3) ** (2 - m * (i - j)) if j <= i else Fraction(0) for j in range(n)] for i in range(n)]
    return [[p / sum(row) for p in row] for row in powers]


def test_biased_is_the_contracts_formula_for_every_key():
    trace = tracer.run("alibi", "exact")
    for h, m in enumerate(SLOPES):
        i, j = np.indices((5, 5))
        np.testing.assert_allclose(trace[f"h{h}.biased"], trace[f"h{h}.scaled"] - m * (i - j), atol=1e-12)


def test_unmasked_weights_are_blooms():
    """With no mask the later keys count: the weights are BLOOM's softmax(s + m·j) (its alibi tensor
    is slope · key position), which − m·(i − j) gives too; a penalty on |i − j| would not."""
    trace = tracer.run("alibi", "exact", mask="none")
    for h, m in enumerate(SLOPES):
        s = np.asarray(trace[f"h{h}.scaled"], dtype=np.float64) + m * np.arange(5)[None, :]
        bloom = np.exp(s - s.max(1, keepdims=True))
        np.testing.assert_allclose(trace[f"h{h}.weights"], bloom / bloom.sum(1, keepdims=True), atol=1e-12)


def test_a_later_key_is_said_to_be_masked_next():
    causal = tracer.run("alibi")
    story = causal.explain("h0.biased", 0, 4)
    assert story.endswith("= 2 + 8 = 10   (la#4 comes 4 tokens after la#0: −m·(i − j) is a bonus here, not a "
                          "penalty, but the mask removes this key next, so it never counts; head 0's slope 2)")
    assert "masked next" in causal.step("h0.biased").formula
    assert "back from" in causal.explain("h0.biased", 4, 0)
    open_ = tracer.run("alibi", mask="none")
    assert "no mask hides it" in open_.explain("h0.biased", 0, 4)
    assert "masked next" not in open_.step("h0.biased").formula


@pytest.mark.parametrize("head", [0, 1])
def test_by_hand_weights_are_fractions_in_every_row(capsys, head):
    assert main(["show", "alibi", "--step", f"h{head}.weights"]) == 0
    rows = capsys.readouterr().out.strip().splitlines()[-5:]
    want = by_hand_weights(head)
    for line, ref in zip(rows, want):
        cells = line.split()[1:]
        assert cells == [str(f) for f in ref], line
    assert "6561/7381" in "".join(rows) or head == 1


def test_a_decimal_in_a_table_of_fractions_says_why(capsys, tmp_path):
    """Slope 3 over six tokens: the last row's sum is (3^18 − 1)/26 over 3^15, its weights' denominator
    14 900 788, past what a fraction is written with."""
    path = tmp_path / "steep.toml"
    path.write_text('arithmetic = "by-hand"\nmask = "causal"\nalibi = [3]\nx = [[1], [1], [1], [1], [1], [1]]\n'
                    "[weights]\nq = [[1]]\nk = [[1]]\nv = [[1]]\n", encoding="utf-8")
    assert main(["show", str(path), "--step", "h0.weights"]) == 0
    lines = capsys.readouterr().out.rstrip().splitlines()
    denominator = sum(3 ** (3 * k) for k in range(6))
    assert math.gcd(3 ** 15, denominator) == 1 and denominator == 14_900_788
    assert lines[-1] == "  (decimals: no fraction with a denominator up to 1 000 000 equals them)"
    assert f"{3 ** 15 / denominator:.4g}" in lines[-2]   # the last row, as a decimal
    assert "/" in lines[-3]                            # the rows before it stay fractions
    md = tmp_path / "steep.md"
    assert main(["export", str(path), "-o", str(md)]) == 0
    text = md.read_text(encoding="utf-8")
    # under the powers (3^−15 is 1/14 348 907), their sums and the weights
    assert text.count("(decimals: no fraction with a denominator up to 1 000 000 equals them)") == 3
    assert main(["show", "by_hand", "--step", "h0.weights"]) == 0
    assert "decimals:" not in capsys.readouterr().out
