"""The fast paths (fused kernels, vectorised exp, untraced output, memory refusal, start-up
plumbing) against a plain NumPy reference written here, never their own output."""
from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracer

TOL = {"float64": 1e-12, "float32": 2e-5}


# ---------------------------------------------------------------- the reference

def reference(x, wq, wk, wv, wo, allowed, *, scale, base, normalize, stable, dtype, residual=None):
    """Every step, rows orientation, computed in float64 from the inputs rounded to dtype."""
    cast = lambda a: np.asarray(a, dtype=dtype).astype(np.float64)  # noqa: E731
    x = cast(x)
    steps, zs = {"x": x}, []
    for h in range(len(wq)):
        p = f"h{h}."
        q, k, v = x @ cast(wq[h]), x @ cast(wk[h]), x @ cast(wv[h])
        s = q @ k.T
        d_k = q.shape[1]
        if scale == "sqrt":
            scaled = s / math.sqrt(d_k)
        elif scale == "floor":
            scaled = np.floor(s / max(1, round(math.sqrt(d_k))))
        elif scale == "none":
            scaled = s
        else:
            scaled = s / scale
        masked = scaled if allowed is None else np.where(allowed, scaled, -np.inf)
        steps.update({p + "q": q, p + "k": k, p + "v": v, p + "scores": s, p + "scaled": scaled})
        if allowed is not None:
            steps[p + "masked"] = masked
        if normalize == "relu":
            w = np.where(masked > 0, masked, 0.0)
        else:
            shift = np.zeros((len(x), 1))
            if stable:
                shift = masked.max(axis=1, keepdims=True)
                shift[np.isneginf(shift)] = 0.0
            e = np.exp(masked - shift) if base == "e" else np.power(float(base), masked - shift)
            sums = e.sum(axis=1, keepdims=True)
            w = np.divide(e, sums, out=np.zeros_like(e), where=sums > 0)
            steps.update({p + "exp": e, p + "sums": sums})
        steps[p + "weights"] = w
        steps[p + "z"] = w @ v
        zs.append(w @ v)
    y = zs[0]
    if len(wq) > 1:
        y = steps["concat"] = np.hstack(zs)
    if wo is not None:
        y = steps["out"] = y @ cast(wo)
    if residual:
        r = steps["residual"] = x + y
        steps["norm"] = (r - r.mean(axis=1, keepdims=True)) / np.sqrt(r.var(axis=1, keepdims=True) + 1e-5)
    return steps


def assert_close(got, want, dtype, what):
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == want.shape, what
    assert np.array_equal(np.isneginf(got), np.isneginf(want)), f"{what}: −∞ cells differ"
    fin = np.isfinite(want)
    big = np.abs(want[fin]).max(initial=0.0)
    tol = TOL[dtype]
    atol = 1e-300 if what.endswith(("exp", "sums")) else tol * max(1.0, big)
    np.testing.assert_allclose(got[fin], want[fin], rtol=tol, atol=atol, err_msg=what)


def layer(n=70, d=10, heads=3, d_k=5, seed=0, o=True):
    rng = np.random.default_rng(seed)
    w = lambda *shape: rng.standard_normal(shape) / math.sqrt(shape[-2])  # noqa: E731
    return (rng.standard_normal((n, d)), w(heads, d, d_k), w(heads, d, d_k), w(heads, d, d_k),
            w(heads * d_k, d) if o else None)


def scenario(parts, layout, mask):
    x, wq, wk, wv, wo = parts
    if layout == "rows":
        return tracer.from_arrays(x, list(wq), list(wk), list(wv), o=wo, mask=mask)
    t = lambda m: None if m is None else m.T  # noqa: E731
    mask = mask if isinstance(mask, str) else np.asarray(mask).T.tolist()
    return tracer.from_arrays(x.T, [m.T for m in wq], [m.T for m in wk], [m.T for m in wv], o=t(wo),
                              layout="columns", mask=mask)


ARITHMETIC = {
    "exact": dict(scale="sqrt", softmax_base="e", normalize="softmax", stable=True),
    "by-hand": dict(scale="floor", softmax_base=3.0, normalize="softmax", stable=False),
    "relu": dict(scale="sqrt", softmax_base="e", normalize="relu", stable=True),
    "unscaled-raw-e": dict(scale="none", softmax_base="e", normalize="softmax", stable=False),
    "divide-by-2.5-base-2": dict(scale=2.5, softmax_base=2.0, normalize="softmax", stable=True),
}


def masks(n):
    rng = np.random.default_rng(7)
    m = (rng.random((n, n)) < 0.5).astype(int)
    m[3] = 0  # a query that may attend nothing: zero weights, and a warning
    return {"none": "none", "causal": "causal", "matrix": m.tolist()}


# ---------------------------------------------------------------- the fused trace

@pytest.mark.filterwarnings("ignore::tracer.AttentionWarning")
@pytest.mark.parametrize("arith", sorted(ARITHMETIC))
@pytest.mark.parametrize("mask_kind", ["none", "causal", "matrix"])
@pytest.mark.parametrize("layout", ["rows", "columns"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fused_trace_matches_numpy(dtype, layout, mask_kind, arith):
    parts = layer()
    mask = masks(70)[mask_kind]
    keys = ARITHMETIC[arith]
    trace = tracer.run(scenario(parts, layout, mask), engine="fused", dtype=dtype, **keys)
    assert trace.engine == "fused"
    allowed = None if mask == "none" else (np.tri(70, dtype=bool) if mask == "causal" else np.array(mask, bool))
    want = reference(*parts, allowed, scale=keys["scale"], base=keys["softmax_base"],
                     normalize=keys["normalize"], stable=keys["stable"], dtype=dtype)
    assert [s.id for s in trace.steps] == list(want)
    for step_id, ref in want.items():
        got = trace.rows(step_id)
        assert got.dtype == np.dtype(dtype), step_id
        assert_close(got, ref, dtype, step_id)


@pytest.mark.parametrize("n", [1, 127, 128, 129, 258])
def test_block_edges(n):
    """Blocks of 128 queries (compute.BLOCK): one token, just under, exactly, just over, two
    blocks and a bit."""
    parts = layer(n=n, heads=2, seed=n)
    trace = tracer.run(scenario(parts, "rows", "causal"), engine="fused")
    want = reference(*parts, np.tri(n, dtype=bool), scale="sqrt", base="e", normalize="softmax",
                     stable=True, dtype="float64")
    for step_id, ref in want.items():
        assert_close(trace[step_id], ref, "float64", step_id)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_lazy_fused_equals_eager_bit_for_bit(dtype):
    sc = scenario(layer(n=90, heads=4), "rows", "causal")
    eager = tracer.run(sc, engine="fused", dtype=dtype, lazy=False)
    lazy = tracer.run(sc, engine="fused", dtype=dtype, lazy=True)
    for step in reversed(eager.steps):  # last head first: heads are evicted and computed again
        np.testing.assert_array_equal(lazy[step.id], eager[step.id], err_msg=step.id)


def test_fused_and_stages_record_the_same_steps_with_residual_and_low_rank():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((80, 6))
    wq, wk = rng.standard_normal((2, 2, 6, 3))
    down, up = rng.standard_normal((2, 6, 2)), rng.standard_normal((2, 2, 4))
    sc = tracer.from_arrays(x, list(wq), list(wk), v_down=list(down), v_up=list(up), o=rng.standard_normal((8, 6)),
                            mask="causal", residual={"norm": "layer"})
    a, b = tracer.run(sc, engine="stages"), tracer.run(sc, engine="fused")
    assert [s.id for s in a.steps] == [s.id for s in b.steps]
    for step in a.steps:
        assert_close(b[step.id], np.asarray(a[step.id], dtype=np.float64), "float64", step.id)


# ---------------------------------------------------------------- the untraced output

@pytest.mark.filterwarnings("ignore::tracer.AttentionWarning")
@pytest.mark.parametrize("engine", ["stages", "fused"])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "matrix"])
@pytest.mark.parametrize("layout", ["rows", "columns"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_attention_is_the_last_step(dtype, layout, mask_kind, engine):
    parts = layer(heads=2)
    mask = masks(70)[mask_kind]
    out = tracer.attention(scenario(parts, layout, mask), engine=engine, dtype=dtype)
    allowed = None if mask == "none" else (np.tri(70, dtype=bool) if mask == "causal" else np.array(mask, bool))
    want = reference(*parts, allowed, scale="sqrt", base="e", normalize="softmax", stable=True, dtype=dtype)["out"]
    assert out.dtype == np.dtype(dtype)
    assert_close(out.T if layout == "columns" else out, want, dtype, "out")


def test_attention_names_the_step_that_overflows():
    parts = layer(n=70, heads=1, o=False)
    sc = scenario(parts, "rows", "causal")
    with pytest.raises(tracer.ScenarioError) as info:
        tracer.attention(sc, engine="fused", scale="none", stable=False, softmax_base=1e300)
    assert info.value.field in ("h0.exp", "h0.sums")


def test_a_hidden_minus_infinity_score_is_an_error_in_the_fused_engine_too():
    x = np.ones((70, 1))
    x[5] = 1e200
    sc = tracer.from_arrays(x, [[1.0]], [[-1.0]], [[1.0]], mask="causal")  # q·k at (5, 5): −1e400
    with pytest.raises(tracer.ScenarioError) as info:
        tracer.run(sc, engine="fused")
    assert info.value.field == "h0.scores"


# ---------------------------------------------------------------- the vectorised exp

@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fast_exp_against_numpy(dtype):
    from numba import njit
    from tracer.kernels.fastexp import exp_row

    @njit
    def run(a, shift):
        exp_row(a, a.shape[0], shift)

    rng = np.random.default_rng(0)
    edges = [-np.inf, np.inf, np.nan, 0.0, -0.0, 1.0, -1.0, 709.78, 709.79, 710.0, -745.1, -745.2, -708.4,
             88.72, 88.73, -87.3, -103.9, -104.0, 1e-30, -1e-30]
    x = np.concatenate([edges, rng.uniform(-760, 720, 200_000), rng.uniform(-1, 1, 50_000)]).astype(dtype)
    got = x.copy()
    run(got, 0.0)
    with np.errstate(all="ignore"):
        want = np.exp(x.astype(np.float64)).astype(dtype)  # correctly rounded to dtype, or close
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    normal = np.isfinite(want) & (want >= np.finfo(dtype).tiny)
    np.testing.assert_allclose(got[normal], want[normal], rtol=4 * np.finfo(dtype).eps, atol=0)
    tiny = np.isfinite(want) & (want < np.finfo(dtype).tiny)  # subnormal or 0: absolute error only
    assert np.all(np.abs(got[tiny].astype(np.float64) - want[tiny]) <= 2 * np.finfo(dtype).tiny)


# ---------------------------------------------------------------- memory

def test_a_whole_trace_that_cannot_fit_is_refused_before_allocating():
    n, heads = 9000, 8
    ones = [[[1.0]]] * heads
    sc = tracer.from_arrays(np.ones((n, 1)), ones, ones, ones, mask="causal")
    need = 5 * heads * n * n * 8
    from tracer import memory
    if memory.fits(need):
        pytest.skip("this machine could hold the whole trace")
    assert tracer.run(sc).lazy                    # by default: heads on demand
    with pytest.raises(tracer.ScenarioError, match=r"needs about \d+\.\d GiB") as info:
        tracer.run(sc, lazy=False)
    assert info.value.field == "lazy"


# ---------------------------------------------------------------- start-up plumbing

def _python(code: str, **env) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_scipy_linalg_still_imports_normally_after_the_blas_preload():
    out = _python("import sys, numpy as np\n"
                  "from tracer.kernels import stage_kernels\n"
                  "K = stage_kernels(compiled=True)\n"
                  "a = np.arange(9.0).reshape(3, 3)\n"
                  "assert np.allclose(K.project(a, a), a @ a)\n"
                  "import scipy.linalg\n"
                  "assert scipy.linalg.cython_blas is sys.modules['scipy.linalg.cython_blas']\n"
                  "print(round(float(scipy.linalg.det(a + np.eye(3))), 6))")
    assert float(out) == pytest.approx(np.linalg.det(np.arange(9.0).reshape(3, 3) + np.eye(3)))


def test_compile_notices_only_when_a_kernel_is_compiled(tmp_path):
    code = ("import tracer\nseen = []\ntracer.on_compile(seen.append)\n"
            "tracer.run('by_hand', engine='stages')\nprint(len(seen)); print(seen[0] if seen else '')")
    first = _python(code, NUMBA_CACHE_DIR=str(tmp_path)).splitlines()
    assert int(first[0]) >= 5 and "compiling" in first[1] and "cached afterwards" in first[1]
    again = _python(code, NUMBA_CACHE_DIR=str(tmp_path)).splitlines()
    assert int(again[0]) == 0


def test_importing_tracer_does_not_import_numba():
    assert _python("import sys, tracer\nprint('numba' in sys.modules)").strip() == "False"


def test_a_tiny_trace_runs_its_kernels_uncompiled_with_the_same_numbers():
    out = _python("import sys, numpy as np, tracer\n"
                  "runs = [tracer.run('by_hand', p) for p in ('by-hand', 'exact')]\n"
                  "print('numba' in sys.modules)\n"
                  "again = [tracer.run('by_hand', p, engine='stages') for p in ('by-hand', 'exact')]\n"
                  "print('numba' in sys.modules)\n"
                  "print(all(np.allclose(a[s.id], b[s.id], rtol=1e-15, atol=0) for a, b in zip(runs, again)"
                  " for s in a.steps))").split()
    assert out == ["False", "True", "True"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="OpenBLAS is found by its loaded library on Linux")
def test_every_openblas_loaded_is_held_to_one_thread_inside_a_parallel_kernel():
    """SciPy's OpenBLAS (numba's np.dot) and NumPy's own (a 64-bit build whose names end in 64_):
    each on one thread while a parallel kernel runs, each given back its threads after."""
    from tracer.kernels import blas
    assert blas.can_limit()   # loads SciPy's
    maps = open("/proc/self/maps").read()
    libraries = {line.split()[-1] for line in maps.splitlines() if "openblas" in line.lower()}
    assert len(blas._api) == len(libraries)   # one control for each library, numpy's among them
    before = [get() for _, get in blas._api]
    with blas.one_thread():
        assert [get() for _, get in blas._api] == [1] * len(libraries)
    assert [get() for _, get in blas._api] == before


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 600), end=st.integers(0, 600), dtype=st.sampled_from([np.float32, np.float64]),
       masked=st.floats(0, 1), seed=st.integers(0, 2**16))
def test_a_rows_max_is_numpys_at_every_length(n, end, dtype, masked, seed):
    """The row helper's max (sixteen running maxima up to 256 keys, lanes of 64 past them) against
    np.max over the first `end` keys, some of them masked to −∞; −∞ for none."""
    from tracer.kernels.fused import _max
    rng = np.random.default_rng(seed)
    a = rng.normal(scale=1e3, size=n).astype(dtype)
    a[rng.random(n) < masked] = -np.inf
    end = min(end, n)
    assert _max(a, end) == (a[:end].max() if end else -np.inf)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 300), offset=st.integers(0, 20), dtype=st.sampled_from([np.float32, np.float64]))
def test_a_streamed_row_lands_whole_wherever_it_starts(n, offset, dtype):
    """stream() writes whole cache lines by streaming stores and the ends by ordinary ones: at any
    length and any start (rows of a step rarely begin on a line), dst gets src and nothing past it."""
    from tracer.kernels.simd import stream
    raw = np.full(n + 40, -1.0, dtype)
    src = np.arange(1, n + 1, dtype=dtype) * 0.5
    stream(raw[offset:offset + n], src)
    np.testing.assert_array_equal(raw[offset:offset + n], src)
    assert (raw[:offset] == -1).all() and (raw[offset + n:] == -1).all()


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 300), start=st.integers(-3, 310), dtype=st.sampled_from([np.float32, np.float64]))
def test_a_rows_tail_is_filled_from_its_start_and_nowhere_else(n, start, dtype):
    """_fill (the masked keys' −∞, the zeros past the last key attended) in unsigned steps: from
    `start` to the row's end, nothing before it or past the row; nothing for a start past the end."""
    from tracer.kernels.fused import _fill
    raw = np.arange(n + 40, dtype=dtype)
    row = raw[20:20 + n]
    _fill(row, max(start, 0), -np.inf)
    want = np.arange(n + 40, dtype=dtype)
    want[20 + min(max(start, 0), n):20 + n] = -np.inf
    np.testing.assert_array_equal(raw, want)


@settings(max_examples=60, deadline=None)
@given(k=st.integers(-4, 12), odd=st.booleans(), dtype=st.sampled_from([np.float32, np.float64]),
       seed=st.integers(0, 2**16))
def test_scaling_by_a_power_of_two_is_the_division_bit_for_bit(k, odd, dtype, seed):
    """÷c is a product by 1/c when c is a power of two (√64 = 8): the same number to the last bit,
    subnormals, infinities and NaN included; any other c still divides."""
    from tracer.kernels.fused import SCALE_DIVIDE, _scale
    rng = np.random.default_rng(seed)
    info = np.finfo(dtype)
    a = np.concatenate([rng.normal(scale=1e3, size=40), rng.uniform(-1, 1, 20) * info.tiny * 4,
                        rng.uniform(-1, 1, 10) * info.max, [np.inf, -np.inf, np.nan, 0.0, -0.0]]).astype(dtype)
    c = 2.0 ** k * (1.4142135623730951 if odd else 1.0)
    with np.errstate(over="ignore"):   # c < 1 takes the largest numbers past the dtype's range: inf
        want = (a.astype(np.float64) / c).astype(dtype)
    _scale(a, SCALE_DIVIDE, c)
    np.testing.assert_array_equal(a, want)
