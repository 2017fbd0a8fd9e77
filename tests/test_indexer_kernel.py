"""The compiled indexer (tracer/kernels/indexer.py) against the readable formula modules: the same
scores and the same chosen keys (ties towards the earlier key, fewer than k seen), causal over
tokens and over V4's entries, in float64 and float32; attention over the chosen keys against
NumPy written here."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracer.kernels import indexer as kernel
from tracer.mechanisms.compressed.pool import visible as entries_visible
from tracer.mechanisms.indexer import scores, topk


def _case(seed, n, heads, d, ties, dtype, keys=None):
    rng = np.random.default_rng(seed)
    draw = (lambda *s: rng.integers(-2, 3, size=s)) if ties else (lambda *s: rng.normal(size=s))
    q = np.ascontiguousarray(draw(n, heads, d), dtype=dtype)
    k = np.ascontiguousarray(draw(n if keys is None else keys, d), dtype=dtype)
    w = np.ascontiguousarray(draw(n, heads), dtype=dtype)
    return q, k, w


@settings(max_examples=60)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.integers(1, 5), st.integers(1, 6), st.integers(1, 12),
       st.booleans(), st.sampled_from([np.float64, np.float32]))
def test_causal_scores_and_choice_equal_the_formula(seed, n, heads, d, top, ties, dtype):
    q, k, w = _case(seed, n, heads, d, ties, dtype)
    got, chosen = kernel.index_topk(q, k, w, np.arange(1, n + 1), top, 0.25)
    want = scores.index_scores(q.astype(float), k.astype(float), w.astype(float), 0.25, scores.causal(n))
    tol = 1e-12 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert (np.isinf(got) == np.isinf(want)).all()
    if ties or dtype == np.float64:   # float32 rounding may reorder near-equal scores: compare exact ones
        np.testing.assert_array_equal(kernel.selected(chosen, n), topk.select(got.astype(float), top))
    assert ((chosen >= 0).sum(axis=1) == np.minimum(np.arange(1, n + 1), top)).all()


@settings(max_examples=30)
@given(st.integers(0, 2**32 - 1), st.integers(1, 30), st.sampled_from([1, 2, 4]), st.integers(1, 4))
def test_entries_of_deepseek_v4(seed, n, m, top):
    """Queries see ⌊(t + 1)/m⌋ entries: early ones none (no key chosen, −1 throughout)."""
    entries = n // m
    q, k, w = _case(seed, n, 3, 4, False, np.float64, keys=entries)
    seen = entries_visible(n, entries, m)
    got, chosen = kernel.index_topk(q, k, w, seen.sum(axis=1), top, 1.0)
    want = scores.index_scores(q, k, w, 1.0, seen)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(kernel.selected(chosen, entries), topk.select(want, top))


def test_without_keeping_the_scores_the_choice_is_the_same():
    q, k, w = _case(5, 300, 4, 8, False, np.float64)
    full, chosen = kernel.index_topk(q, k, w, np.arange(1, 301), 17, 0.3)
    none, again = kernel.index_topk(q, k, w, np.arange(1, 301), 17, 0.3, keep_scores=False)
    assert none is None and (chosen == again).all()


@pytest.mark.parametrize("bad", ["shape", "visible", "dtype", "k"])
def test_bad_arguments_are_refused(bad):
    q, k, w = _case(1, 5, 2, 3, False, np.float64)
    vis, top = np.arange(1, 6), 2
    if bad == "shape":
        k = np.ascontiguousarray(k[:, :2])
    elif bad == "visible":
        vis = vis[::-1].copy()
    elif bad == "dtype":
        w = w.astype(np.float32)
    else:
        top = 0
    with pytest.raises(ValueError, match="index_topk"):
        kernel.index_topk(q, k, w, vis, top, 1.0)


@given(st.integers(0, 2**32 - 1), st.integers(1, 20), st.integers(1, 6))
def test_attention_over_the_chosen_keys(seed, n, top):
    rng = np.random.default_rng(seed)
    heads, dk, dv = 3, 5, 4
    q, k, v = rng.normal(size=(n, heads, dk)), rng.normal(size=(n, dk)), rng.normal(size=(n, dv))
    _, chosen = kernel.index_topk(*_case(seed + 1, n, 2, 3, False, np.float64), np.arange(1, n + 1), top, 1.0)
    got = kernel.attend_chosen(q, k, v, chosen, 0.5)
    keep = kernel.selected(chosen, n)
    for t in range(n):
        for h in range(heads):
            s = np.where(keep[t], k @ q[t, h] * 0.5, -np.inf)
            a = np.exp(s - s.max())
            np.testing.assert_allclose(got[t, h], (a / a.sum()) @ v, rtol=1e-10, atol=1e-12)


@settings(max_examples=200)
@given(st.lists(st.one_of(st.integers(-3, 3).map(float), st.floats(allow_nan=True, allow_infinity=True, width=32)),
                min_size=1, max_size=80), st.data())
def test_the_kth_largest_is_what_numpy_partition_gives(row, data):
    """The quickselect behind each query's choice, against np.partition: equal scores, ±∞, NaN."""
    row = np.array(row)
    end = data.draw(st.integers(1, len(row)))
    kth = data.draw(st.integers(0, end - 1))
    want = -np.partition(-row[:end], kth)[kth]
    got = kernel._kth_largest(row, end, kth)
    assert got == want or (np.isnan(got) and np.isnan(want))
