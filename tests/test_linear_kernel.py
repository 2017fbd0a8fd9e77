"""The compiled linear attention kernel (tracer/kernels/linear.py, through mechanisms/linear/heads.py)
against its NumPy twin (formula.py, itself checked against references in test_linear_formula.py): every
rule, float64 and float32, grouped heads, lengths below, at and across the kernel's blocks, value
heads narrower and wider than the four channels the recurrence walks at once."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracer.kernels.linear import CHUNK
from tracer.mechanisms.linear.heads import all_heads
from tracer.mechanisms.linear.formula import l2norm


def layer(n: int, heads: int, groups: int, d_k: int, d_v: int, rule: str, dtype, seed: int = 0):
    rng = np.random.default_rng(seed)
    width = d_k if rule == "kda" else 1
    cast = lambda a: np.ascontiguousarray(a, dtype=dtype)  # noqa: E731
    return (cast(rng.normal(size=(groups, n, d_k)) / np.sqrt(d_k)), cast(l2norm(rng.normal(size=(groups, n, d_k)))),
            cast(rng.normal(size=(heads, n, d_v))), cast(rng.uniform(0.5, 1.0, size=(heads, n, width))),
            None if rule == "decay" else cast(rng.uniform(0.0, 2.0, size=(heads, n))))


@pytest.mark.parametrize("rule", ["delta", "decay", "kda"])
@pytest.mark.parametrize("n", [1, 7, CHUNK, 2 * CHUNK + 9])
@pytest.mark.parametrize("d_v", [3, 9])   # the kernel walks value channels four at a time, then the rest
def test_compiled_equals_the_twin_in_float64(rule, n, d_v):
    args = layer(n, 4, 2, 5, d_v, rule, np.float64)
    twin = all_heads(*args, rule, compiled=False)
    fast = all_heads(*args, rule, compiled=True)
    for got, want in zip(fast, twin):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert not np.triu(fast.implicit, 1).any()


@pytest.mark.parametrize("rule", ["delta", "kda"])
def test_float32_stays_float32_and_near_the_float64_twin(rule):
    args = layer(2 * CHUNK + 3, 2, 1, 8, 4, rule, np.float32, seed=1)
    fast = all_heads(*args, rule, compiled=True)
    twin = all_heads(*(None if a is None else a.astype(np.float64) for a in args), rule, compiled=False)
    assert {a.dtype for a in fast} == {np.dtype(np.float32)}
    for got, want in zip(fast, twin):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)


def test_states_and_implicit_can_be_left_out():
    args = layer(70, 2, 2, 4, 3, "delta", np.float64)
    out = all_heads(*args, "delta", states=False, implicit=False, compiled=True)
    assert out.states is None and out.implicit is None
    np.testing.assert_allclose(out.o, all_heads(*args, "delta", compiled=False).o, rtol=1e-10, atol=1e-12)


def test_read_only_and_writable_gates_share_one_compiled_kernel():
    """A scenario's gates are read-only, a computed beta is not: numba would compile the kernel anew
    (≈9 s) for each mix; all_heads hands it read-only views of every input, whatever it was given."""
    from tracer.kernels.linear import linear_heads
    args = layer(20, 2, 1, 4, 3, "delta", np.float64)
    for frozen in (args[3], args[4]):
        frozen.flags.writeable = False
        all_heads(*args, "delta", compiled=True)
    for signature in linear_heads.signatures:   # every one this process compiled or loaded
        assert all(not arg.mutable for arg in signature[:5]), signature


def test_the_implicit_weights_read_the_values():
    q, k, v, alpha, beta = layer(150, 3, 1, 6, 2, "delta", np.float64, seed=2)
    out = all_heads(q, k, v, alpha, beta, "delta", compiled=True)
    np.testing.assert_allclose(out.implicit @ v, out.o, rtol=1e-9, atol=1e-10)


def test_mismatched_arrays_are_refused_before_the_kernel():
    q, k, v, alpha, beta = layer(5, 2, 1, 4, 3, "delta", np.float64)
    with pytest.raises(ValueError, match="beta has shape"):
        all_heads(q, k, v, alpha, beta[:, :4], "delta", compiled=True)
    with pytest.raises(ValueError, match="alpha must be C-contiguous float64"):
        all_heads(q, k, v, alpha.astype(np.float32), beta, "delta", compiled=True)
    with pytest.raises(ValueError, match="multiple of key heads"):
        all_heads(np.concatenate([q, q, q]), np.concatenate([k, k, k]), v, alpha, beta, "delta", compiled=True)


@settings(max_examples=40, deadline=None)
@given(shape=st.tuples(st.integers(1, 4), st.integers(1, 9), st.integers(1, 9)), dtype=st.sampled_from([np.float32, np.float64]),
       spots=st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from([np.inf, -np.inf, np.nan, "max", "tiny"])), max_size=4))
def test_each_head_is_found_finite_or_not_as_numpy_says(shape, dtype, spots):
    """The compiled check of what left the range (x·0 summed) against np.isfinite, head by head: the
    largest and the smallest finite numbers are finite, ±∞ and NaN are not."""
    from tracer.kernels.linear import finite_heads
    a = np.random.default_rng(len(spots)).normal(size=shape).astype(dtype)
    info = np.finfo(dtype)
    for at, value in spots:
        a.flat[at % a.size] = info.max if value == "max" else info.tiny if value == "tiny" else value
    ok = np.empty(shape[0], np.bool_)
    finite_heads(a, ok)
    np.testing.assert_array_equal(ok, np.isfinite(a).all(axis=(1, 2)))
