"""One wide product for several heads' projections (kernels.matmul_side, Scenario.joined) against
NumPy in float64, written here: every head's share, at any number of rows (blocks cut anywhere)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tracer
from tracer.kernels import SIDE_ROWS, matmul_side

TOL = {np.float32: 2e-5, np.float64: 1e-12}


@settings(max_examples=40, deadline=None)
@given(n=st.sampled_from([1, 2, 7, 63, SIDE_ROWS - 1, SIDE_ROWS + 1, 2 * SIDE_ROWS + 5]), heads=st.integers(1, 5),
       d=st.integers(1, 40), m=st.integers(1, 9), dtype=st.sampled_from([np.float32, np.float64]),
       seed=st.integers(0, 2**16))
def test_a_wide_product_deals_each_head_its_columns(n, heads, d, m, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(dtype)
    w = rng.normal(size=(d, heads * m)).astype(dtype)
    out = matmul_side(x, w, heads)
    assert out.shape == (heads, n, m) and out.dtype == dtype
    full = x.astype(np.float64) @ w.astype(np.float64)
    for h in range(heads):
        np.testing.assert_allclose(out[h], full[:, h * m:(h + 1) * m], rtol=TOL[dtype], atol=TOL[dtype] * d)


def test_joined_weights_are_each_heads_matrix_side_by_side_and_every_heads_are_kept():
    sc = tracer.load_scenario("multi_head")
    arrays = (sc.w_q, sc.w_k, sc.w_v)
    for heads in (range(sc.heads), range(1, sc.heads)):
        w = sc.joined(arrays, slice(heads[0], heads[-1] + 1), np.float32)
        parts = [a[h] for a in arrays for h in heads]   # q of each head, then k, then v
        assert w.dtype == np.float32 and w.flags.c_contiguous
        np.testing.assert_array_equal(w, np.hstack(parts).astype(np.float32))
    for narrow in ((sc.w_q[:, :, :1],), (sc.w_q[:, :, :1], sc.w_k[:, :, :1])):   # heads one column wide
        w = sc.joined(narrow, slice(0, sc.heads), np.float64)
        assert w.flags.c_contiguous and w.shape == (sc.w_q.shape[1], len(narrow) * sc.heads)
    assert sc.joined(arrays, slice(0, sc.heads), np.float32) is sc.joined(arrays, slice(0, sc.heads), np.float32)
    assert sc.joined(arrays, slice(1, sc.heads), np.float32) is not sc.joined(arrays, slice(1, sc.heads), np.float32)
    assert sc.joined(arrays, slice(0, sc.heads), np.float64) is not sc.joined(arrays, slice(0, sc.heads), np.float32)
