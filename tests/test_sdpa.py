"""tracer.sdpa against torch.nn.functional.scaled_dot_product_attention on generated shapes and masks
(batch dimensions that broadcast, heads, grouped heads, L ≠ S, boolean masks per head or shared,
float masks with −inf and whole rows of it, is_causal, scale; float32 and float64 tensors), and its
weights against a plain-NumPy softmax; the additive mask in a scenario file; bad input in one line."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracer

torch = pytest.importorskip("torch")
F = torch.nn.functional


@st.composite
def problems(draw):
    batch = tuple(draw(st.lists(st.integers(1, 2), max_size=2)))
    gqa, n = draw(st.booleans()), draw(st.integers(1, 3))
    if gqa:      # key/value heads read by n // kv query heads each
        heads, kv = n * draw(st.integers(1, 2)), n
    else:        # the same heads, or one side's single head broadcast
        heads, kv = draw(st.sampled_from([(n, n), (n, 1), (1, n)]))
    L, S, E, Ev = (draw(st.integers(1, 5)) for _ in range(4))
    kind = draw(st.sampled_from(["none", "causal", "bool_shared", "bool_heads", "float", "float_rows"]))
    seed = draw(st.integers(0, 2**31 - 1))
    scale = draw(st.one_of(st.none(), st.floats(0.05, 3.0)))
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    return batch, heads, kv, gqa, L, S, E, Ev, kind, seed, scale, dtype


def make(batch, heads, kv, L, S, E, Ev, kind, seed, dtype):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, heads, L, E, generator=g, dtype=dtype)
    k = torch.randn(*batch, kv, S, E, generator=g, dtype=dtype)
    v = torch.randn(*batch, kv, S, Ev, generator=g, dtype=dtype)
    heads = max(heads, kv)   # the output's heads
    mask = None
    if kind == "bool_shared":
        mask = torch.rand(L, S, generator=g) < 0.7
    elif kind == "bool_heads":
        mask = torch.rand(heads, L, S, generator=g) < 0.6
    elif kind.startswith("float"):
        mask = torch.randn(*batch, heads, L, S, generator=g, dtype=dtype)
        mask[torch.rand(mask.shape, generator=g) < 0.3] = -torch.inf
        if kind == "float_rows":
            mask[..., 0, :] = -torch.inf   # a query that sees nothing
    return q, k, v, mask


def numpy_weights(q, k, mask, causal, scale):
    """softmax(q·kᵀ·scale + mask) over the keys, in float64; a row with no key left: zeros."""
    q, k = q.double().numpy(), k.double().numpy()
    if q.shape[-3] > k.shape[-3]:   # grouped: head h reads key head h // (H / H_kv)
        k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
    s = q @ np.swapaxes(k, -1, -2) * (1 / np.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    elif mask is not None:
        m = mask.numpy()
        s = np.where(m, s, -np.inf) if m.dtype == bool else s + m.astype(np.float64)
    top = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0))
    sums = e.sum(axis=-1, keepdims=True)
    return np.divide(e, sums, out=np.zeros_like(e), where=sums > 0)


@settings(max_examples=60)
@given(problems())
def test_sdpa_matches_pytorch(problem):
    batch, heads, kv, gqa, L, S, E, Ev, kind, seed, scale, dtype = problem
    q, k, v, mask = make(batch, heads, kv, L, S, E, Ev, kind, seed, dtype)
    causal = kind == "causal"
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale, enable_gqa=gqa)
    got = tracer.sdpa(q, k, v, mask, is_causal=causal, scale=scale, enable_gqa=gqa)
    assert got.output.shape == tuple(want.shape)
    tol = 1e-12 if dtype == torch.float64 else 3e-6 * (1 + (scale or 1) * E)
    np.testing.assert_allclose(got.output, want.double().numpy(), rtol=0, atol=tol)
    weights = numpy_weights(q, k, mask, causal, scale)
    np.testing.assert_allclose(got.weights, weights, rtol=0, atol=1e-12)
    trace = got.trace(*[n - 1 for n in batch])   # the last batch element, traced
    last = (*[n - 1 for n in batch],)
    for h in range(max(heads, kv)):
        np.testing.assert_array_equal(trace[f"h{h}.q"], q[last + (min(h, heads - 1),)].double().numpy())
        np.testing.assert_allclose(trace[f"h{h}.weights"], weights[last + (h,)], atol=1e-12)


def test_two_dimensional_inputs_and_the_trace_of_a_single_element():
    q = torch.randn(5, 4, dtype=torch.float64)
    got = tracer.sdpa(q, q, q, is_causal=True)
    assert got.output.shape == (5, 4)
    np.testing.assert_allclose(got.output, F.scaled_dot_product_attention(q, q, q, is_causal=True).numpy(), atol=1e-14)
    trace = got.trace()
    assert trace.scenario.tokens[:2] == ["t0", "t1"] and "h0.masked" in trace


def test_a_fully_masked_query_gets_zero_output_as_pytorch_2_14_gives():
    q = torch.randn(1, 3, 4, dtype=torch.float64)
    for mask in (torch.tensor([[True, True, False], [False, False, False], [True, True, True]]),
                 torch.tensor([[0.0, 0.0, -torch.inf], [-torch.inf] * 3, [0.0, 1.0, 2.0]], dtype=torch.float64)):
        want = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
        assert (want[0, 1] == 0).all()    # what PyTorch returns for that query today
        got = tracer.sdpa(q, q, q, mask)
        np.testing.assert_allclose(got.output, want.numpy(), atol=1e-14)
        assert (got.weights[0, 1] == 0).all()
        assert got.trace().warnings[0].startswith(("t1:", "t1 (head 0):"))


@pytest.mark.parametrize("call, message", [
    (lambda q: tracer.sdpa(q, q[..., :3], q), r"^k: expected E = 4"),
    (lambda q: tracer.sdpa(q, q, q, torch.ones(3, 3, dtype=torch.int64)), r"^mask: expected booleans"),
    (lambda q: tracer.sdpa(q, q, q, torch.ones(2, 3, 3, 3, dtype=torch.bool)), r"^mask: expected a shape that broadcasts"),
    (lambda q: tracer.sdpa(q, q, q, torch.full((3, 3), torch.inf)), r"^mask\[0, 0\]: expected a number or -inf"),
    (lambda q: tracer.sdpa(q, q, q, torch.ones(3, 3, dtype=torch.bool), is_causal=True), r"^is_causal: expected either"),
    (lambda q: tracer.sdpa(q, torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4), enable_gqa=True),
     r"^k: expected with enable_gqa"),
    (lambda q: tracer.sdpa(q, q, q, scale=0), r"^scale: expected one number > 0"),
    (lambda q: tracer.sdpa(q, q, q, dropout_p=0.1), r"^dropout_p: expected 0"),
    (lambda q: tracer.sdpa(q, q, q).trace(0, 0), r"^batch: expected 1 index within \(1,\)"),
])
def test_bad_input_is_one_line_naming_the_argument(call, message):
    q = torch.randn(1, 3, 3, 4)
    with pytest.raises(tracer.ScenarioError, match=message):
        call(q)
