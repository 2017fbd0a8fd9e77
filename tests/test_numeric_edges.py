"""Numeric edge cases (CONTRACT §3, issue 5): overflowing powers, fully masked queries, 1e±300,
a single token, d_k = 1, float32 against float64, −0.0; each result checked against plain NumPy."""
import warnings

import numpy as np
import pytest

import tracer
from tracer.printing import fmt

fa = tracer.from_arrays


def ref_softmax_attention(x, wq, wk, wv, divisor=1.0, base=np.e, stable=True, allowed=None):
    """Plain NumPy, rows orientation; a query with nothing to attend gets zero weights."""
    s = (x @ wq) @ (x @ wk).T / divisor
    if allowed is not None:
        s = np.where(allowed, s, -np.inf)
    shift = s.max(axis=1, keepdims=True) if stable else np.zeros((len(s), 1))
    shift[~np.isfinite(shift)] = 0
    p = np.power(base, s - shift)
    sums = p.sum(axis=1, keepdims=True)
    w = np.divide(p, sums, out=np.zeros_like(p), where=sums > 0)
    return w, w @ (x @ wv)


def one_d(x, q=1.0, k=1.0, v=1.0, **kw):
    """A scenario with d_model = d_k = d_v = 1: x is a column of token values."""
    return fa([[float(t)] for t in x], [[q]], [[k]], [[v]], **kw)


# ------------------------------------------------------------ raw powers that overflow

def test_by_hand_raw_powers_overflow_names_the_exp_step():
    with pytest.raises(tracer.ScenarioError) as info:
        tracer.run(one_d([1000, 1]), "by-hand")  # 3^(⌊10⁶ / 1⌋) is far beyond float64
    assert info.value.field == "h0.exp" and "raw powers overflow" in str(info.value)
    assert "stable=true" in str(info.value)


def test_unstable_exact_powers_overflow_but_stable_ones_do_not():
    sc = one_d([800 ** 0.5, 1])  # a score of 800: e^800 overflows, e^(800 − 800) does not
    with pytest.raises(tracer.ScenarioError) as info:
        tracer.run(sc, "exact", stable=False, scale="none")
    assert info.value.field == "h0.exp"
    trace = tracer.run(sc, "exact", scale="none")
    want, _ = ref_softmax_attention(np.array([[800 ** 0.5], [1.0]]), *np.ones((3, 1, 1)))
    np.testing.assert_allclose(trace["h0.weights"], want, rtol=1e-12)


def test_stable_and_raw_powers_give_the_same_weights_when_both_fit():
    sc = one_d([20, 3, -7])
    raw, stable = tracer.run(sc, stable=False), tracer.run(sc, stable=True)
    np.testing.assert_allclose(raw["h0.weights"], stable["h0.weights"], rtol=1e-12)
    assert raw["h0.exp"][0, 0] == pytest.approx(np.exp(400.0))  # the raw power, as a worksheet shows it
    assert stable["h0.exp"][0, 0] == 1.0                        # e^(s − max) for the max itself


def test_a_huge_base_overflows_raw_but_not_stable():
    sc = one_d([2, 1])
    with pytest.raises(tracer.ScenarioError) as info:
        tracer.run(sc, "by-hand", softmax_base=1e300)
    assert info.value.field == "h0.exp"
    trace = tracer.run(sc, "by-hand", softmax_base=1e300, stable=True)
    want, _ = ref_softmax_attention(np.array([[2.0], [1.0]]), *np.ones((3, 1, 1)), divisor=1.0, base=1e300)
    np.testing.assert_allclose(trace["h0.weights"], want, rtol=1e-12)


def test_relu_with_an_infinite_score_names_the_scores():
    with pytest.raises(tracer.ScenarioError) as info:
        tracer.run(one_d([1e300, 1]), normalize="relu")
    assert info.value.field == "h0.scores"


# a +inf or −inf that the later steps hide (0 weights, inf − inf) must still be an error
SILENT = {
    "inf_score": (dict(x=[1e300, 1]), {}, "h0.scores"),
    "neg_inf_score": (dict(x=[1e200, 1], k=-1.0), {}, "h0.scores"),
    "float32_projection": (dict(x=[1e20, 1], q=1e20), dict(dtype="float32"), "h0.q"),
    "float32_scores": (dict(x=[2e19, 1]), dict(dtype="float32", scale="none"), "h0.scores"),
    "tiny_scale": (dict(x=[2, 1]), dict(scale=1e-310), "h0.scaled"),
}


@pytest.mark.parametrize("engine", ["stages", "numpy"])
@pytest.mark.parametrize("case", sorted(SILENT))
def test_overflow_is_never_silent(case, engine, monkeypatch):
    """On the compiled kernels and on the NumPy engine that a cold kernel cache runs (which checks
    sums first, and once let an overflowed −∞ score through when nothing was masked)."""
    kw, overrides, step = SILENT[case]
    if engine == "numpy":
        from tracer.kernels import warm
        monkeypatch.setattr(warm, "use_numpy", lambda: True)
        tracer.run("by_hand", engine="stages")   # numba loaded: an auto trace then asks the cache
        assert tracer.run(one_d([1, 2])).engine == "numpy"
    with pytest.raises(tracer.ScenarioError) as info:
        tracer.run(one_d(**kw), engine="auto" if engine == "numpy" else "stages", **overrides)
    assert info.value.field == step


# ------------------------------------------------------------ fully masked queries

@pytest.mark.parametrize("preset", ["exact", "by-hand"])
@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_a_fully_masked_query_gets_zero_weights_and_a_warning(preset, layout):
    x = np.array([[3.0, 1.0], [1.0, 2.0], [0.0, 1.0]])  # rows: 3 tokens × d_model 2
    wq, wk, wv = np.array([[1.0], [0.0]]), np.array([[1.0], [1.0]]), np.array([[2.0], [1.0]])
    allowed = np.array([[0, 0, 0], [1, 1, 0], [1, 1, 1]], dtype=bool)  # query t1 may attend nothing
    if layout == "rows":
        sc = fa(x, wq, wk, wv, mask=allowed.astype(int).tolist(), tokens=["a", "b", "c"])
    else:
        sc = fa(x.T, wq.T, wk.T, wv.T, layout="columns", mask=allowed.T.astype(int).tolist(), tokens=["a", "b", "c"])
    with pytest.warns(tracer.AttentionWarning, match="a: every key is masked"):
        trace = tracer.run(sc, preset)
    assert len(trace.warnings) == 1 and trace.warnings[0].startswith("a: ")
    # d_k = 1: ÷√1 and ⌊÷1⌋ leave these integer scores alone; by-hand is 3ˣ with raw powers
    base, stable = (np.e, True) if preset == "exact" else (3.0, False)
    want_w, want_z = ref_softmax_attention(x, wq, wk, wv, base=base, stable=stable, allowed=allowed)
    np.testing.assert_allclose(trace.rows("h0.weights"), want_w, rtol=1e-12)
    np.testing.assert_allclose(trace.rows("h0.z"), want_z, rtol=1e-12)
    assert np.array_equal(trace.rows("h0.weights")[0], np.zeros(3))   # exactly 0, as PyTorch
    assert np.array_equal(trace.rows("h0.z")[0], np.zeros(1))
    assert trace.rows("h0.sums")[0, 0] == 0
    assert np.isfinite(trace.rows("h0.weights")).all()


def test_no_warning_without_a_fully_masked_query():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trace = tracer.run(one_d([1, 2, 3], mask="causal"))
    assert trace.warnings == []


# ------------------------------------------------------------ extremes, one token, d_k = 1, −0.0

def test_tiny_inputs_underflow_to_uniform_weights():
    trace = tracer.run(one_d([1e-300, 1e-300, 3e-300]))
    assert (trace["h0.scores"] == 0).all()            # 1e−600 is below the smallest subnormal
    np.testing.assert_array_equal(trace["h0.weights"], np.full((3, 3), 1 / 3))


def test_huge_inputs_with_tiny_weights_are_fine():
    x = np.array([[1e300], [2e300]])
    trace = tracer.run(fa(x, [[1e-300]], [[1e-300]], [[1e-300]]))
    want_w, want_z = ref_softmax_attention(x, *np.full((3, 1, 1), 1e-300))
    np.testing.assert_allclose(trace["h0.weights"], want_w, rtol=1e-12)
    np.testing.assert_allclose(trace["h0.z"], want_z, rtol=1e-12)


@pytest.mark.parametrize("preset", ["exact", "by-hand"])
@pytest.mark.parametrize("mask", ["none", "causal"])
def test_a_single_token_attends_to_itself(preset, mask):
    x, wq, wk, wv = np.array([[3.0, -1.0]]), np.array([[1.0], [2.0]]), np.array([[0.5], [0.0]]), np.array([[5.0, 1.0], [1.0, 0.0]])
    trace = tracer.run(fa(x, wq, wk, wv, mask=mask), preset)
    assert trace["h0.weights"].tolist() == [[1.0]]
    np.testing.assert_allclose(trace["h0.z"], x @ wv, rtol=1e-15)


def test_d_k_of_one_against_numpy():
    rng = np.random.default_rng(11)
    x, wq, wk, wv = rng.normal(size=(5, 4)), rng.normal(size=(4, 1)), rng.normal(size=(4, 1)), rng.normal(size=(4, 3))
    trace = tracer.run(fa(x, wq, wk, wv))
    want_w, want_z = ref_softmax_attention(x, wq, wk, wv, divisor=1.0)  # ÷√1
    np.testing.assert_allclose(trace["h0.weights"], want_w, rtol=1e-12)
    np.testing.assert_allclose(trace["h0.z"], want_z, rtol=1e-12)
    by_hand = tracer.run(fa(np.round(x * 3), np.round(wq), np.round(wk), wv), "by-hand")
    s = (np.round(x * 3) @ np.round(wq)) @ (np.round(x * 3) @ np.round(wk)).T
    np.testing.assert_array_equal(by_hand["h0.scaled"], np.floor(s / 1))  # ⌊x ÷ round(√1)⌋


def test_float32_holds_what_float64_holds_then_refuses_what_it_cannot():
    sc = one_d([1e20, 1], v=1e20)  # v = 1e40: beyond float32's 3.4e38, easy for float64
    assert np.isfinite(tracer.run(sc, dtype="float64")["h0.z"]).all()
    with pytest.raises(tracer.ScenarioError) as info:
        tracer.run(sc, dtype="float32")
    assert info.value.field == "h0.v" and "float32's range" in str(info.value)


def test_float32_results_match_float64_where_both_fit():
    rng = np.random.default_rng(5)
    x, wq, wk, wv = rng.normal(size=(6, 4)), rng.normal(size=(4, 2)), rng.normal(size=(4, 2)), rng.normal(size=(4, 3))
    sc = fa(x, wq, wk, wv, mask="causal")
    t32, t64 = tracer.run(sc, dtype="float32"), tracer.run(sc, dtype="float64")
    assert t32["h0.weights"].dtype == np.float32 and t64["h0.weights"].dtype == np.float64
    np.testing.assert_allclose(t32["h0.weights"], t64["h0.weights"], rtol=1e-5, atol=1e-6)


def test_float32_overflowing_input_names_the_input():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(tracer.ScenarioError) as info:
            tracer.run(one_d([1e39, 1]), dtype="float32")
    assert info.value.field == "x"


@pytest.mark.parametrize("preset", ["exact", "by-hand"])
def test_negative_zero_behaves_as_zero(preset):
    neg = fa([[-0.0, 2.0], [1.0, -0.0]], [[-0.0], [1.0]], [[1.0], [-0.0]], [[-0.0], [3.0]])
    pos = fa([[0.0, 2.0], [1.0, 0.0]], [[0.0], [1.0]], [[1.0], [0.0]], [[0.0], [3.0]])
    tn, tp = tracer.run(neg, preset), tracer.run(pos, preset)
    for step in tp.steps:
        assert np.array_equal(tn[step.id], tp[step.id]), step.id  # −0.0 == 0.0, cell by cell
    assert np.array_equal(tn["h0.weights"], tp["h0.weights"])
    assert "−0" not in tn.explain("h0.scores", 0, 0) and fmt(-0.0) == "0"


def test_overflow_in_the_columns_layout_is_a_scenario_error():
    # columns layout, 3 tokens, a 1 × 2 value map: v for the third token is 2.3e292 · 7.8e16 = inf
    x = [[0.0, 0.0, 7.77e16], [0.0, 0.0, 0.0]]
    sc = fa(x, [[0.0, 0.0]], [[0.0, 0.0]], [[2.3e292, 0.0]], layout="columns")
    with pytest.raises(tracer.ScenarioError) as info:
        tracer.run(sc)
    assert info.value.field == "h0.v" and "[0, 2]" in str(info.value)  # d_v row 0, token column 2


def test_a_causal_mask_matrix_is_built_only_when_asked():
    """The fused kernels mask a causal trace by index: its query × key matrix is built only when a
    reader asks for it (an explanation, an export), and is then key j for query i iff j ≤ i."""
    rng = np.random.default_rng(4)
    n = 300
    sc = tracer.from_arrays(x=rng.normal(size=(n, 8)), q=rng.normal(size=(8, 4)), k=rng.normal(size=(8, 4)),
                            v=rng.normal(size=(8, 4)), mask="causal")
    trace = tracer.run(sc, engine="fused")
    assert "allowed" not in vars(trace)
    i, j = np.indices((n, n))
    assert np.array_equal(trace.allowed, j <= i)
    assert np.isneginf(trace.rows("h0.masked")[0, 1]) and trace.rows("h0.weights")[0, 0] == 1.0
