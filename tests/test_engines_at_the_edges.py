"""Numbers at the edges, in every engine (plain Python kernels, compiled, fused, NumPy) and both
dtypes: subnormal raw powers are refused naming the cell, a huge row's layer norm is ±1, and the
engines agree to the last place where their arithmetic is the same (else within a tested bound)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tracer
from engines import run_in
from tracer import kernels
from tracer.kernels import warm

TINY = {"float64": np.finfo(np.float64).tiny, "float32": np.finfo(np.float32).tiny}


def two_keys(top: float, gap: float) -> tracer.Scenario:
    """Query t1's scores are top and top − gap (no scaling): raw powers base^top, base^(top − gap)."""
    return tracer.from_arrays(x=[[1.0, 0.0], [0.0, 1.0]], q=[[1.0], [0.0]], k=[[top], [top - gap]],
                              v=[[1.0], [2.0]])


@pytest.mark.parametrize("engine", ["py", "jit", "numpy", "fused"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("base, top", [(3.0, -677.0), (3.0, -660.0), (3.0, -80.5), (3.0, -86.0), (2.0, -1030.0),
                                       ("e", -720.0), ("e", -90.0), (10.0, -310.5), (3.0, -640.0)])
def test_subnormal_raw_powers_are_refused_naming_the_cell(engine, dtype, base, top):
    b = math.e if base == "e" else base
    largest = b ** top   # Python's float64 pow: independent of every engine
    if dtype == "float32":
        largest = float(np.float32(largest))
    scenario = two_keys(top, 1.0)
    keys = dict(scale="none", softmax_base=base, dtype=dtype)
    if largest == 0:
        return   # all powers 0: the older 0 ÷ 0 error, tested in test_numeric_edges
    if largest >= TINY[dtype] or (dtype == "float32" and abs(top) > 150):
        trace = run_in(engine, scenario, stable=False, **keys)
        np.testing.assert_allclose(trace["h0.weights"][0], [b / (1 + b), 1 / (1 + b)], rtol=1e-5)
        return
    with pytest.raises(tracer.ScenarioError) as info:
        run_in(engine, scenario, stable=False, **keys)
    message = str(info.value)
    assert message.startswith("h0.exp: the raw powers of query t1 are all subnormal in " + dtype)
    assert "at [0, 0]" in message and "stable=true" in message
    stable = run_in(engine, scenario, stable=True, **keys)   # the same scores, max subtracted: fine
    np.testing.assert_allclose(stable["h0.weights"][0], [b / (1 + b), 1 / (1 + b)], rtol=1e-5)


@pytest.mark.parametrize("engine", ["py", "jit", "numpy", "fused"])
@pytest.mark.parametrize("dtype, big", [("float64", 1e200), ("float64", 1e300), ("float64", 1e-200),
                                        ("float32", 3e19), ("float32", 1e30), ("float32", 1e-20)])
def test_layer_norm_of_a_huge_row_is_plus_minus_one(engine, dtype, big):
    x = np.array([[big, -big], [1.0, 3.0]])
    scenario = tracer.from_arrays(x=x, q=[[0.0], [0.0]], k=[[0.0], [0.0]], v=np.zeros((2, 2)),
                                  residual={"norm": "layer", "eps": 1e-5})
    norm = run_in(engine, scenario, dtype=dtype)["norm"].astype(np.float64)
    centred = np.array([1.0, -1.0]) * big / math.sqrt(big * big + 1e-5) if big < 1 else [1.0, -1.0]
    np.testing.assert_allclose(norm[0], centred, rtol=1e-5)
    np.testing.assert_allclose(norm[1], [-1.0 / math.sqrt(1 + 1e-5), 1.0 / math.sqrt(1 + 1e-5)], rtol=1e-5)


def test_layer_norm_plain_and_compiled_agree_bit_for_bit():
    rng = np.random.default_rng(4)
    for dtype in (np.float32, np.float64):
        for scale in (1e-30, 1.0, 1e19, 3e37 if dtype == np.float32 else 1e300):
            r = (rng.standard_normal((8, 16)) * scale).astype(dtype)
            plain = kernels.stage_kernels(compiled=False)
            jit = kernels.stage_kernels(compiled=True)
            assert np.array_equal(plain.layer_norm(r, 1e-5), jit.layer_norm(r, 1e-5))
            assert np.isfinite(jit.layer_norm(r, 1e-5)).all()


RANDOM = "[random]\nseed = {seed}\ntokens = {n}\nd_model = 32\nheads = 2\nd_k = 16\n"


@pytest.fixture(scope="module", params=[(5, 64), (9, 48)])
def scenario(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("agree") / "r.toml"
    path.write_text(RANDOM.format(seed=request.param[0], n=request.param[1]))
    return tracer.load_scenario(str(path))


def ulps(a: np.ndarray, b: np.ndarray) -> int:
    """The largest distance in units in the last place, over cells that are not near 0."""
    ints = np.int32 if a.dtype == np.float32 else np.int64
    d = np.abs(a.view(ints).astype(np.int64) - b.view(ints).astype(np.int64))
    keep = np.abs(b) > 1e-3 * np.abs(b).max() if b.size else b
    return int(d[keep].max()) if keep.any() else 0


def test_plain_and_compiled_kernels_agree_to_the_last_place_in_float64(scenario):
    """The same arithmetic (float64 sums, libm's exp): equal, cell for cell."""
    py, jit = run_in("py", scenario, dtype="float64"), run_in("jit", scenario, dtype="float64")
    for step in jit.steps:
        assert np.array_equal(py[step.id], jit[step.id]), step.id


def test_plain_and_compiled_kernels_stay_within_2_ulp_in_float32(scenario):
    """float32: LLVM takes exp of a widened float32 in float32 precision (README's bound)."""
    py, jit = run_in("py", scenario, dtype="float32"), run_in("jit", scenario, dtype="float32")
    for step in jit.steps:
        assert ulps(py[step.id], jit[step.id]) <= (2 if step.kind in ("exp", "sums", "weights") else 0) \
            or step.kind in ("z", "concat", "out"), step.id


@pytest.mark.parametrize("engine", ["numpy", "fused"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_other_engines_stay_within_the_documented_bound(scenario, engine, dtype):
    """Another exp (NumPy's, the fused vectorised one) or sum order: weights within 8 ulp."""
    other, jit = run_in(engine, scenario, dtype=dtype), run_in("jit", scenario, dtype=dtype)
    for step in jit.steps:
        if step.kind in ("exp", "sums", "weights"):
            assert ulps(other[step.id], jit[step.id]) <= 8, step.id
        eps = np.finfo(dtype).eps
        np.testing.assert_allclose(other[step.id], jit[step.id], rtol=64 * eps, atol=64 * eps * np.abs(jit[step.id]).max())


def test_a_cold_cache_is_the_numpy_engine(monkeypatch, scenario):
    monkeypatch.setattr(warm, "use_numpy", lambda: True)
    assert tracer.run(scenario, dtype="float32").engine in ("numpy", "stages", "fused")
