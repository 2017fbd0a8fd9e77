"""QK-norm (Qwen3, Gemma 3, OLMo 2; mechanisms/qk_norm.py): its lesson's numbers worked out here, a
normed score of a whole number floored as that number by hand, and norm_eps 0: a row of zeros
refused naming the eps, a row of tiny values still normed (its checkpoint families:
test_model_families.py; with every other mechanism: test_together.py)."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import tracer
from engines import run_in


def fractions(trace, sid: str, row: int) -> list[Fraction]:
    return [Fraction(float(v)).limit_denominator(1000) for v in trace.rows(sid)[row]]


def test_qk_norm_lesson():
    t = tracer.run("qk_norm")   # by-hand
    np.testing.assert_array_equal(t.rows("h0.q_norm")[0], t.rows("h0.q_norm")[1])   # cat and CAT alike
    assert t.rows("h0.scores").max() == pytest.approx(8, rel=1e-15)                 # 2 × 1 × 4, not 64
    np.testing.assert_array_equal(np.diag(t.rows("h0.scaled")), 4)                  # ⌊8 ÷ 2⌋, never 3
    assert fractions(t, "h0.weights", 2)[:3] == [Fraction(1, 5), Fraction(1, 5), Fraction(3, 5)]
    assert fractions(t, "h0.weights", 3) == [Fraction(1, 14), Fraction(1, 14), Fraction(3, 14), Fraction(9, 14)]
    assert "= 4 ÷ √(16) × 2 = 2" in t.explain("h0.q_norm", 1, 0)


@pytest.mark.parametrize("engine", ["auto", "stages", "fused"])
@pytest.mark.parametrize("algorithm", ["standard", "online"])
def test_by_hand_floors_a_normed_score_of_a_whole_number_as_that_number(engine, algorithm):
    """q̂·q̂ is exactly gain² · d_k = 4, computed as 3.9999999999999996 for most rows: ⌊4 ÷ 2⌋ is 2, not 1."""
    import numba  # noqa: F401  (the compiled stage kernels too, not only their plain Python)
    rows = np.array([[0, 0, 1, 1], [0, 0, 1, 2], [1, 2, 3, 5], [0, 4, 1, 3], [5, 1, 2, 0]], float)
    sc = tracer.from_arrays(rows, np.eye(4), np.eye(4), np.eye(4), q_norm=[1] * 4, k_norm=[1] * 4, qk_norm_eps=0)
    trace = tracer.run(sc, "by-hand", engine=engine, algorithm=algorithm, block=2)
    if algorithm == "standard":
        np.testing.assert_array_equal(np.diag(trace.rows("h0.scaled")), 2.0)
    else:
        np.testing.assert_array_equal([trace.rows(f"h0.blk{i // 2}.scores")[i, i % 2] for i in range(5)], 2.0)
    for dtype in ("float32", "float64"):
        np.testing.assert_array_equal(np.diag(tracer.run(sc, "by-hand", dtype=dtype).rows("h0.scaled")), 2.0)


def qk_normed(x, scope: str) -> tracer.Scenario:
    """Two heads reading x as it is (identity projections), q and k RMS-normed with gain 1 and
    norm_eps = 0, each head's own (scope "head") or every head's together ("all")."""
    eye = np.eye(2)
    return tracer.from_arrays(x=x, q=[eye, eye], k=[eye, eye], v=[[[1.0], [1.0]]] * 2, q_norm=[1.0, 1.0],
                              k_norm=[1.0, 1.0], qk_norm_eps=0, qk_norm_scope=scope)


@pytest.mark.parametrize("engine", ["py", "jit", "fused"])
@pytest.mark.parametrize("scope", ["head", "all"])
def test_a_row_of_zeros_under_norm_eps_0_is_refused_naming_the_eps(engine, scope):
    """0 ÷ √0 has no value (PyTorch's RMSNorm gives NaN): one line naming weights.norm_eps and the
    row, where it was a ZeroDivisionError (plain and compiled kernels) or a NaN blamed on a step."""
    with pytest.raises(tracer.ScenarioError) as info:
        run_in(engine, qk_normed([[0.0, 0.0], [1.0, 2.0]], scope))
    message = str(info.value)
    assert message.startswith("weights.norm_eps: is 0, and ") and "\n" not in message
    assert "of token 0 ('t1') is all zeros" in message and "0 ÷ 0 has no value" in message
    assert ("every head's" if scope == "all" else "head 0's") in message


@pytest.mark.parametrize("engine", ["py", "jit", "fused"])
@pytest.mark.parametrize("scope", ["head", "all"])
@pytest.mark.parametrize("tiny", [1e-200, 1e-170])
def test_norm_eps_0_norms_a_row_of_tiny_values(engine, scope, tiny):
    """Rows whose squares underflow to 0 in float64 still have a root mean square: t/√2 for
    [t, 0] and 5t/√2 for [3t, −4t], so that they norm to [√2, 0] and [3√2/5, −4√2/5]."""
    trace = run_in(engine, qk_normed([[tiny, 0.0], [3 * tiny, -4 * tiny]], scope))
    r = math.sqrt(2)
    for sid in ("h0.q_norm", "h1.q_norm", "h0.k_norm"):
        np.testing.assert_allclose(trace[sid], [[r, 0.0], [3 * r / 5, -4 * r / 5]], rtol=1e-15, err_msg=sid)
