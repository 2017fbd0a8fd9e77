"""The tracer against PyTorch's scaled_dot_product_attention on generated scenarios (rows layout,
several heads, causal and explicit masks with fully masked queries, W_O); skipped without torch."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracer
from tracer.scenario import build

torch = pytest.importorskip("torch")
F = torch.nn.functional

EPS32 = float(np.finfo(np.float32).eps)


def tolerance(sc, dtype: str) -> float:
    """float64: 1e-9. float32: a few float32 steps, times how much softmax magnifies the scores'
    rounding (each weight moves by about the error of its score, itself about eps·Σ|q_c·k_c|/√d_k)."""
    if dtype == "float64":
        return 1e-9
    x = np.abs(sc.x)
    spread = max(((x @ np.abs(sc.w_q[h])) @ (x @ np.abs(sc.w_k[h])).T).max() for h in range(sc.heads))
    return 8 * EPS32 * (1 + spread / np.sqrt(sc.d_k))


def torch_attention(x, wq, wk, wv, wo, mask, dtype):
    """Per-head outputs (heads, n, d_v), concatenation and W_O, with SDPA doing the attention."""
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=dtype))  # noqa: E731
    X = t(x)
    q = torch.stack([X @ t(w) for w in wq])[None]  # (1, heads, n, d_k)
    k = torch.stack([X @ t(w) for w in wk])[None]
    v = torch.stack([X @ t(w) for w in wv])[None]  # (1, heads, n, d_v)
    if isinstance(mask, str):
        z = F.scaled_dot_product_attention(q, k, v, is_causal=mask == "causal")
    else:  # boolean, True = may attend (query × key)
        z = F.scaled_dot_product_attention(q, k, v, attn_mask=torch.from_numpy(np.asarray(mask, dtype=bool)))
    z = z[0]
    concat = z.permute(1, 0, 2).reshape(x.shape[0], -1)  # (n, heads·d_v)
    return z.numpy(), concat.numpy(), (concat @ t(wo)).numpy()


def close(got, want, tol: float, scale: float, what: str):
    """Equal to tol, relative to the magnitude of the terms that made the values (cancellation)."""
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, scale), err_msg=what)


def check(sc, mask, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tracer.AttentionWarning)
        trace = tracer.run(sc, "exact", dtype=dtype)
    z, concat, out = torch_attention(sc.x, sc.w_q, sc.w_k, sc.w_v, sc.w_o, mask, dtype)
    tol = tolerance(sc, dtype)
    for h in range(sc.heads):
        close(trace[f"h{h}.z"], z[h], tol, np.abs(trace[f"h{h}.v"]).max(), f"h{h}.z")
    if sc.heads > 1:
        close(trace["concat"], concat, tol, np.abs(concat).max(), "concat")
    close(trace["out"], out, tol, (np.abs(concat) @ np.abs(sc.w_o)).max(), "out")
    return trace, z


@st.composite
def scenarios(draw):
    n, d_model = draw(st.integers(1, 7)), draw(st.integers(1, 8))
    heads, d_k, d_v, d_out = (draw(st.integers(1, 4)) for _ in range(4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["none", "causal", "explicit", "explicit"]))
    mask = kind
    if kind == "explicit":
        mask = rng.random((n, n)) < draw(st.sampled_from([0.3, 0.6, 0.9]))
        if draw(st.booleans()):
            mask[rng.integers(n)] = False  # a query that may attend to nothing
    spread = draw(st.sampled_from([0.5, 1.0, 3.0]))
    w = lambda *shape: rng.normal(scale=spread, size=shape)  # noqa: E731
    sc = tracer.from_arrays(x=w(n, d_model), q=list(w(heads, d_model, d_k)), k=list(w(heads, d_model, d_k)),
                            v=list(w(heads, d_model, d_v)), o=w(heads * d_v, d_out), mask=mask)
    return sc, mask


@settings(max_examples=120)
@given(scenarios(), st.sampled_from(["float64", "float32"]))
def test_generated_scenarios_match_sdpa(sc_mask, dtype):
    check(*sc_mask, dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_random_section_gpt_like_layer(dtype):
    sc = build({"mask": "causal", "random": dict(seed=3, tokens=48, d_model=64, heads=4, d_k=16, output=True)})
    check(sc, "causal", dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fully_masked_queries_agree_with_sdpa(dtype):
    """The contract's all-zero weights: SDPA (torch 2.13) also returns a zero output for such a query
    (a plain softmax over a row of −∞ would give NaN instead)."""
    rng = np.random.default_rng(0)
    mask = np.ones((4, 4), dtype=bool)
    mask[1] = mask[3] = False
    sc = tracer.from_arrays(x=rng.normal(size=(4, 3)), q=list(rng.normal(size=(2, 3, 2))),
                            k=list(rng.normal(size=(2, 3, 2))), v=list(rng.normal(size=(2, 3, 2))),
                            o=rng.normal(size=(4, 3)), mask=mask)
    trace, z = check(sc, mask, dtype)
    assert (z[:, [1, 3]] == 0).all() and (trace["h0.weights"][[1, 3]] == 0).all()
