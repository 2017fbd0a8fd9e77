"""The linear attention rules (tracer/mechanisms/linear/formula.py) against references written apart:
the state as an explicit matrix product, token by token; the implicit weights against one-hot values
fed through the recurrence; transformers' own torch_recurrent/torch_chunk gated delta rules and its
Kimi Delta Attention on generated inputs; and a worked example exact to the fraction."""
from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracer.mechanisms.linear.formula import implicit, l2norm, recur, update

torch = pytest.importorskip("torch")
qwen3_next = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")
kimi = pytest.importorskip("transformers.models.kimi_linear.modeling_kimi_linear")


def reference_states(q, k, v, alpha, beta, rule):
    """S_t = M_t·S_{t−1} + β_t·k_t·v_tᵀ with M_t = (I − β_t·k_t·k_tᵀ)·diag(α_t) written as matrices
    (decay rule: M_t = diag(α_t), β = 1), and o_t = S_tᵀ·q_t."""
    n, d_k = k.shape
    S, states, o = np.zeros((d_k, v.shape[1])), [], []
    for t in range(n):
        D = np.diag(np.broadcast_to(alpha[t], (d_k,)))
        b = 1.0 if rule == "decay" else beta[t]
        M = D if rule == "decay" else (np.eye(d_k) - b * np.outer(k[t], k[t])) @ D
        S = M @ S + b * np.outer(k[t], v[t])
        states.append(S)
        o.append(S.T @ q[t])
    return np.array(states), np.array(o)


def inputs(seed: int, n: int, d_k: int, d_v: int, rule: str):
    rng = np.random.default_rng(seed)
    width = d_k if rule == "kda" else 1
    return (rng.normal(size=(n, d_k)), l2norm(rng.normal(size=(n, d_k))), rng.normal(size=(n, d_v)),
            rng.uniform(0.2, 1.0, size=(n, width)), rng.uniform(0.0, 2.0, size=n))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 9), d_k=st.integers(1, 5), d_v=st.integers(1, 4),
       rule=st.sampled_from(["delta", "decay", "kda"]))
def test_states_and_outputs_equal_the_matrix_recurrence(seed, n, d_k, d_v, rule):
    q, k, v, alpha, beta = inputs(seed, n, d_k, d_v, rule)
    states, o = recur(q, k, v, alpha, None if rule == "decay" else beta, rule)
    want_states, want_o = reference_states(q, k, v, alpha, beta, rule)
    np.testing.assert_allclose(states, want_states, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(o, want_o, rtol=1e-12, atol=1e-12)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 9), rule=st.sampled_from(["delta", "decay", "kda"]),
       data=st.data())
def test_decoding_continues_from_the_state_the_prompt_left(seed, n, rule, data):
    """[decode]: the prompt's P tokens at once, then each later token from the carried state."""
    q, k, v, alpha, beta = inputs(seed, n, 3, 2, rule)
    b = None if rule == "decay" else beta
    prompt = data.draw(st.integers(1, n - 1))
    states, o = recur(q, k, v, alpha, b, rule)
    head, _ = recur(q[:prompt], k[:prompt], v[:prompt], alpha[:prompt], None if b is None else b[:prompt], rule)
    S = head[-1]
    for t in range(prompt, n):
        step, read = recur(q[t:t + 1], k[t:t + 1], v[t:t + 1], alpha[t:t + 1], None if b is None else b[t:t + 1],
                           rule, initial=S)
        S = step[0]
        np.testing.assert_allclose(S, states[t], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(read[0], o[t], rtol=1e-12, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 9), d_k=st.integers(1, 5),
       rule=st.sampled_from(["delta", "decay", "kda"]))
def test_implicit_weights_are_what_one_hot_values_read(seed, n, d_k, rule):
    """Value s = e_s (d_v = n): output t is then row t of A, whatever A's closed form says."""
    q, k, _, alpha, beta = inputs(seed, n, d_k, 1, rule)
    b = None if rule == "decay" else beta
    A = implicit(q, k, alpha, b, rule)
    _, read = reference_states(q, k, np.eye(n), alpha, beta, rule)
    np.testing.assert_allclose(A, read, rtol=1e-11, atol=1e-12)
    assert not np.triu(A, 1).any()


def test_the_worked_example_is_exact_and_one_weight_is_negative():
    """delta_rule's numbers (4 tokens, d_k = d_v = 2), in Fractions, against the update written by
    hand: decayed state, prediction Sᵀk, error v − Sᵀk, write β·k·errorᵀ, read Sᵀq."""
    frac = lambda rows: np.array([[F(x) for x in r] for r in rows], dtype=object)  # noqa: E731
    q, k, v = frac([[1, 0], [0, 1], [1, 1], [1, 0]]), frac([[1, 0], [1, 1], [0, 1], [1, 0]]), \
        frac([[2, 0], [0, 2], [2, 2], [4, 0]])
    alpha = np.array([[F(1)], [F(1)], [F(1, 2)], [F(1)]], dtype=object)
    beta = np.array([F(1), F(1, 2), F(1), F(1, 2)], dtype=object)
    states, o = recur(q, k, v, alpha, beta, "delta")
    A = implicit(q, k, alpha, beta, "delta")
    second = update(states[0], k[1], v[1], alpha[1], beta[1], True)
    assert [list(second.prediction), list(second.error)] == [[2, 0], [-2, 2]]
    assert second.write.tolist() == [[-1, 1], [-1, 1]]
    assert states.tolist() == [[[2, 0], [0, 0]], [[1, 1], [-1, 1]], [[F(1, 2), F(1, 2)], [2, 2]],
                               [[F(9, 4), F(1, 4)], [2, 2]]]
    assert o.tolist() == [[2, 0], [-1, 1], [F(5, 2), F(5, 2)], [F(9, 4), F(1, 4)]]
    assert A.tolist() == [[1, 0, 0, 0], [F(-1, 2), F(1, 2), 0, 0], [F(1, 4), F(1, 4), 1, 0],
                          [F(1, 8), F(1, 8), 0, F(1, 2)]]
    assert (A.dot(v) == o).all() and [sum(r) for r in A] == [1, 0, F(3, 2), F(3, 4)]
    assert all(isinstance(x, (int, F)) for x in np.concatenate([states.ravel(), o.ravel(), A.ravel()]))


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_fractions_in_give_fractions_out_and_o_is_a_times_v(data):
    n, d = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 3))
    small = st.fractions(min_value=-3, max_value=3, max_denominator=4)
    q, k, v = (np.array([[data.draw(small) for _ in range(d)] for _ in range(n)], dtype=object) for _ in range(3))
    alpha = np.array([[data.draw(st.fractions(min_value=F(1, 4), max_value=1, max_denominator=4))] for _ in range(n)],
                     dtype=object)
    beta = np.array([data.draw(st.fractions(min_value=0, max_value=2, max_denominator=4)) for _ in range(n)],
                    dtype=object)
    states, o = recur(q, k, v, alpha, beta, "delta")
    assert (implicit(q, k, alpha, beta, "delta").dot(v) == o).all()
    want_states, _ = reference_states(*(a.astype(float) for a in (q, k, v, alpha, beta)), "delta")
    np.testing.assert_allclose(states.astype(float), want_states, rtol=1e-9, atol=1e-9)


def _torch(a: np.ndarray):
    return torch.tensor(np.ascontiguousarray(a), dtype=torch.float32)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40), groups=st.sampled_from([1, 2]),
       per=st.sampled_from([1, 2]), d_k=st.integers(2, 8), d_v=st.integers(1, 6), chunk=st.sampled_from([4, 16, 64]))
def test_gated_delta_rule_equals_transformers_recurrent_and_chunked(seed, n, groups, per, d_k, d_v, chunk):
    """transformers' torch fallbacks (batch × n × heads × d; g the log-decay), which L2-norm q and k
    and scale q by 1/√d_k themselves; value head h reads key head h // per."""
    rng = np.random.default_rng(seed)
    heads = groups * per
    q, k = rng.normal(size=(n, groups, d_k)), rng.normal(size=(n, groups, d_k))
    v = rng.normal(size=(n, heads, d_v))
    alpha, beta = rng.uniform(0.05, 1.0, size=(n, heads)), rng.uniform(0.0, 1.0, size=(n, heads))
    args = (_torch(q[None]), _torch(k[None]), _torch(v[None]), _torch(np.log(alpha)[None]), _torch(beta[None]))
    with torch.no_grad():
        step, _ = qwen3_next.torch_recurrent_gated_delta_rule(*args, use_qk_l2norm_in_kernel=True)
        chunked, _ = qwen3_next.torch_chunk_gated_delta_rule(*args, chunk_size=chunk, use_qk_l2norm_in_kernel=True)
    for h in range(heads):
        g = h // per
        _, o = recur(l2norm(q[:, g]) / np.sqrt(d_k), l2norm(k[:, g]), v[:, h], alpha[:, h, None], beta[:, h], "delta")
        np.testing.assert_allclose(step[0, :, h].numpy(), o, rtol=2e-4, atol=2e-5)
        np.testing.assert_allclose(chunked[0, :, h].numpy(), o, rtol=2e-4, atol=2e-5)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40), heads=st.integers(1, 3), d_k=st.integers(2, 8),
       d_v=st.integers(1, 6), chunk=st.sampled_from([8, 64]))
def test_kda_equals_transformers_kimi_delta_attention(seed, n, heads, d_k, d_v, chunk):
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(n, heads, d_k)), rng.normal(size=(n, heads, d_k)), rng.normal(size=(n, heads, d_v))
    alpha, beta = rng.uniform(0.05, 1.0, size=(n, heads, d_k)), rng.uniform(0.0, 1.0, size=(n, heads))
    args = (_torch(q[None]), _torch(k[None]), _torch(v[None]), _torch(np.log(alpha)[None]), _torch(beta[None]))
    with torch.no_grad():
        step, _ = kimi.recurrent_kimi_delta_attention(*args, None, False, use_qk_l2norm_in_kernel=True)
        chunked, _ = kimi.chunk_kimi_delta_attention(*args, chunk_size=chunk, use_qk_l2norm_in_kernel=True)
    for h in range(heads):
        _, o = recur(l2norm(q[:, h]) / np.sqrt(d_k), l2norm(k[:, h]), v[:, h], alpha[:, h], beta[:, h], "kda")
        np.testing.assert_allclose(step[0, :, h].numpy(), o, rtol=2e-4, atol=2e-5)
        np.testing.assert_allclose(chunked[0, :, h].numpy(), o, rtol=2e-4, atol=2e-5)


def test_l2norm_is_transformers_and_flas():
    x = np.random.default_rng(3).normal(size=(6, 5)) * np.array([[1e-4], [1], [10], [0], [3], [1e-3]])
    for theirs in (qwen3_next.l2norm, kimi.l2norm):
        np.testing.assert_allclose(l2norm(x), theirs(torch.tensor(x), dim=-1, eps=1e-6).numpy(), rtol=1e-12, atol=1e-15)
    assert not l2norm(np.zeros((1, 3))).any()


def test_an_unknown_rule_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown linear attention rule 'gated'.*delta, decay, kda"):
        recur(np.ones((1, 1)), np.ones((1, 1)), np.ones((1, 1)), np.ones((1, 1)), None, "gated")
