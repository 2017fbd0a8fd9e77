"""Numbers the papers and model cards publish, checked cell by cell: the ALiBi slopes of Press et al.
(and BLOOM's build_alibi_tensor in transformers), Llama 3's scaled frequencies and YaRN's ramp and
attention factor (transformers' rope init functions), Gemma 2's cap of 50 on the attention scores."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import tracer

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402


def test_alibi_slopes_of_the_paper_for_8_heads():
    slopes = tracer.alibi_slopes(8)
    assert [Fraction(float(m)) for m in slopes] == [Fraction(1, 2 ** h) for h in range(1, 9)]   # 1/2 … 1/256


def test_alibi_slopes_for_counts_that_are_not_powers_of_two_interleave():
    # 12 heads: the 8 slopes of 8 heads, then every other slope of 16 heads' (2^−0.5, 2^−1.5, 2^−2.5, 2^−3.5)
    want = [2.0 ** -h for h in range(1, 9)] + [2.0 ** -(h + 0.5) for h in range(0, 4)]
    np.testing.assert_allclose(tracer.alibi_slopes(12), want, rtol=1e-15)
    assert list(tracer.alibi_slopes(1)) == [2.0 ** -8]


@pytest.mark.parametrize("heads", [1, 2, 3, 4, 5, 6, 8, 12, 16, 20, 32, 40, 112])
def test_alibi_slopes_equal_bloom_build_alibi_tensor(heads):
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    bias = build_alibi_tensor(torch.ones(1, 3), heads, torch.float64)   # heads × 1 × keys: slope·j
    np.testing.assert_allclose(tracer.alibi_slopes(heads), bias[:, 0, 1].numpy(), rtol=1e-6)


def test_biased_scores_give_the_weights_bloom_gives():
    """BLOOM adds slope·j (a constant per query, as the contract says); ours subtract slope·(i − j):
    the same weights under a causal mask."""
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(5, 4)), [rng.normal(size=(4, 2)) for _ in range(4)]
    trace = tracer.run(tracer.from_arrays(x, w, w, w, mask="causal", alibi=True))
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    bias = build_alibi_tensor(torch.ones(1, 5), 4, torch.float64)[:, 0, :].numpy()
    for h in range(4):
        q = x @ w[h]
        s = q @ q.T / math.sqrt(2) + bias[h][None, :]
        s = np.where(np.tril(np.ones((5, 5), bool)), s, -np.inf)
        e = np.exp(s - s.max(1, keepdims=True))
        np.testing.assert_allclose(trace[f"h{h}.weights"], e / e.sum(1, keepdims=True), rtol=1e-12, atol=1e-15)


def llama_config(rope_type: str, **keys):
    from transformers import LlamaConfig
    return LlamaConfig(hidden_size=2048, num_attention_heads=32, head_dim=64, max_position_embeddings=131072,
                       rope_parameters=dict(rope_type=rope_type, rope_theta=500000.0, **keys))


def test_llama_3_scaling_equals_the_rope_init_function_of_transformers():
    keys = dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=8192)
    inv_freq, factor = ROPE_INIT_FUNCTIONS["llama3"](llama_config("llama3", **keys))
    sc = tracer.from_arrays(np.ones((2, 64)), np.eye(64), np.eye(64), np.eye(64),
                            rope=dict(base=500000.0, scaling=dict(type="llama3", **keys)))
    freqs = tracer.run(sc)["freqs"][:, 0]
    assert freqs.shape == (32,) and factor == 1.0
    np.testing.assert_allclose(freqs, inv_freq.double().numpy(), rtol=2e-6)   # transformers works in float32
    plain = 500000.0 ** (-np.arange(0, 64, 2) / 64)
    wavelength = 2 * np.pi / plain
    kept, slowed = wavelength < 8192 / 4, wavelength > 8192 / 1
    np.testing.assert_allclose(freqs[kept], plain[kept], rtol=1e-15)          # fast pairs unchanged
    np.testing.assert_allclose(freqs[slowed], plain[slowed] / 8, rtol=1e-15)  # slow pairs ÷ 8
    assert kept.sum() and slowed.sum() and (~kept & ~slowed).sum()           # and a blend between


@pytest.mark.parametrize("factor,beta", [(4.0, (32.0, 1.0)), (16.0, (16.0, 2.0)), (2.0, (32.0, 1.0))])
def test_yarn_ramp_and_attention_factor_equal_transformers(factor, beta):
    keys = dict(factor=factor, original_max_position_embeddings=4096, beta_fast=beta[0], beta_slow=beta[1])
    inv_freq, attention = ROPE_INIT_FUNCTIONS["yarn"](llama_config("yarn", **keys))
    assert attention == pytest.approx(0.1 * math.log(factor) + 1, rel=1e-15)   # Peng et al.'s 0.1·ln(s) + 1
    x = np.random.default_rng(1).normal(size=(3, 64))
    sc = tracer.from_arrays(x, np.eye(64), np.eye(64), np.eye(64),
                            rope=dict(base=500000.0, scaling=dict(type="yarn", **keys)))
    trace = tracer.run(sc)
    np.testing.assert_allclose(trace["freqs"][:, 0], inv_freq.double().numpy(), rtol=2e-6)
    # transformers multiplies cos and sin by the factor: rotated queries and keys carry it
    cos, sin = (np.outer(np.arange(3), inv_freq.double().numpy()) for _ in range(2))
    emb = np.concatenate([cos, cos], axis=1)
    half = np.concatenate([-x[:, 32:], x[:, :32]], axis=1)
    hf = x * np.cos(emb) * attention + half * np.sin(emb) * attention
    np.testing.assert_allclose(trace["h0.q_rot"], hf, rtol=1e-5, atol=1e-6)


def test_yarn_ramp_runs_between_the_pairs_that_turn_beta_fast_and_beta_slow_times():
    """Peng et al.: pairs turning more than β_fast times in the original context keep θ, fewer than
    β_slow times take θ ÷ s, and the ramp between is linear in the pair index."""
    spec = dict(base=10000.0, scaling=dict(type="yarn", factor=8.0, original_max_position_embeddings=2048,
                                           beta_fast=32.0, beta_slow=1.0))
    sc = tracer.from_arrays(np.ones((1, 128)), np.eye(128), np.eye(128), np.eye(128), rope=spec)
    freqs = tracer.run(sc)["freqs"][:, 0]
    plain = 10000.0 ** (-np.arange(0, 128, 2) / 128)
    turns = 2048 * plain / (2 * math.pi)
    lo = math.floor(128 * math.log(2048 / (32 * 2 * math.pi)) / (2 * math.log(10000)))
    hi = math.ceil(128 * math.log(2048 / (1 * 2 * math.pi)) / (2 * math.log(10000)))
    ramp = np.clip((np.arange(64) - lo) / (hi - lo), 0, 1)
    np.testing.assert_allclose(freqs, plain * (1 - ramp) + plain / 8 * ramp, rtol=1e-14)
    assert (freqs[turns > 32 * 2] == plain[turns > 32 * 2]).all() and lo > 0
    np.testing.assert_allclose(freqs[turns < 0.5], plain[turns < 0.5] / 8, rtol=1e-14)


def test_gemma_2_caps_attention_scores_at_50():
    from transformers import Gemma2Config
    config = Gemma2Config()
    assert (config.attn_logit_softcapping, config.final_logit_softcapping) == (50.0, 30.0)
    x = np.array([[2.0, 0], [0, 3.0], [-4.0, 1.0]])
    w = np.eye(2) * 3
    trace = tracer.run(tracer.from_arrays(x, w, w, w, softcap=config.attn_logit_softcapping), scale="none")
    s = (x @ w) @ (x @ w).T
    np.testing.assert_allclose(trace["h0.capped"], 50 * np.tanh(s / 50), rtol=1e-15)
    assert trace["h0.capped"].max() < 50 < s.max()   # 153 became 49.78, 36 became 30.85
    assert trace["h0.capped"][2, 2] == pytest.approx(49.78, abs=0.005)
    assert trace["h0.capped"][0, 0] == pytest.approx(30.85, abs=0.005)


@pytest.mark.parametrize("beta_fast, beta_slow", [(1e308, 1.0), (32.0, 1e308), (1e-308, 1e-308)])
def test_yarn_betas_at_the_ends_of_float64_give_the_formulas_value(beta_fast, beta_slow):
    """β·2π overflowed float64 at β = 1e308 (a math domain error, issue 31): the ramp's ends are
    still transformers' d·ln(L / (β·2π)) / (2·ln base), evaluated here in decimal arithmetic."""
    from decimal import Decimal
    d, base, length, factor = 64, 10000.0, 4096, 8.0

    def end(beta: float) -> float:
        return d * float((Decimal(length) / (Decimal(beta) * 2 * Decimal(math.pi))).ln()) / (2 * math.log(base))
    lo, hi = max(math.floor(end(beta_fast)), 0), min(math.ceil(end(beta_slow)), d - 1)
    ramp = np.clip((np.arange(d // 2) - lo) / ((hi - lo) or 0.001), 0, 1)
    theta = base ** (-np.arange(0, d, 2) / d)
    scaling = dict(type="yarn", factor=factor, original_max_position_embeddings=length, beta_fast=beta_fast,
                   beta_slow=beta_slow)
    sc = tracer.from_arrays(np.ones((1, d)), np.eye(d), np.eye(d), np.eye(d), rope=dict(base=base, scaling=scaling))
    np.testing.assert_allclose(tracer.run(sc)["freqs"][:, 0], theta * (1 - ramp) + theta / factor * ramp, rtol=1e-14)
