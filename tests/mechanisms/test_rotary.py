"""Rotary positions (mechanisms/rotary): Llama 3's scaled frequencies and YaRN's ramp and attention
factor against transformers' rope init functions (yarn's betas at float64's ends too), the built-in
lessons of the scaled frequencies, and `[rope] angles = "float32"`: θ_i and p·θ_i formed in float32
as PyTorch models form them. Far into a text (positions 4000+), the exact angles differ from a
float32 PyTorch rotary embedding (transformers' LlamaRotaryEmbedding, and a hand-written one) by
~1e-4 rad while float32 ones agree. (Rotary positions with every other mechanism, and decoded:
test_together.py; the checkpoints' rope_parameters: test_model_families.py.)"""
from __future__ import annotations

import math

import numpy as np
import pytest

import tracer

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402


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


def test_rope_scaling_lessons():
    llama3, plain = tracer.run("rope_scaling"), tracer.run("rope_scaling_plain")
    f, p = llama3.rows("freqs")[:, 0], plain.rows("freqs")[:, 0]
    assert f[0] == p[0] == 1 and f[3] == pytest.approx(p[3] / 8, rel=1e-15)
    assert 300 * f[3] == pytest.approx(1.19, abs=0.005) and 300 * p[3] == pytest.approx(9.49, abs=0.005)
    assert 63 * p[3] < 2.0 < 300 * p[3]                                   # beyond the angles of training
    turns = 64 * p / (2 * math.pi)
    assert turns[0] == pytest.approx(10.19, abs=0.005) and turns[3] == pytest.approx(0.322, abs=0.001)
    linear = tracer.run("rope_scaling_linear")
    assert linear.rows("h0.scores")[1, 0] == pytest.approx(-0.18, abs=0.005)
    assert plain.rows("h0.scores")[1, 0] == pytest.approx(-1.28, abs=0.005)
    yarn = tracer.run("rope_scaling_yarn")
    assert yarn.rows("h0.scores")[0, 0] == pytest.approx(4 * (0.1 * math.log(8) + 1) ** 2, rel=1e-12)
    assert "1.208" in yarn.step("h0.q_rot").formula


D = 64


def hand_written(q: np.ndarray, positions: np.ndarray, base: float) -> np.ndarray:
    """The rotary embedding of a course's notebook: float32 frequencies and angles, rotate-half."""
    inv_freq = 1.0 / (base ** (torch.arange(0, D, 2).float() / D))
    freqs = torch.outer(torch.from_numpy(positions).float(), inv_freq)          # (n, D/2), float32
    emb = torch.cat((freqs, freqs), dim=-1)
    x = torch.from_numpy(q)
    half = torch.cat((-x[..., D // 2:], x[..., : D // 2]), dim=-1)
    return (x * emb.cos().double() + half * emb.sin().double()).numpy()


def llama(q: np.ndarray, positions: np.ndarray, base: float) -> np.ndarray:
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
    cfg = transformers.LlamaConfig(hidden_size=2 * D, num_attention_heads=2, head_dim=D, rope_theta=base)
    x = torch.from_numpy(q)[None, None]                                           # (1, 1, n, D)
    cos, sin = LlamaRotaryEmbedding(cfg)(x, torch.from_numpy(positions)[None])
    return apply_rotary_pos_emb(x, x, cos[:, None], sin[:, None])[0][0, 0].numpy()


def rotated(q: np.ndarray, offset: int, base: float, angles: str) -> np.ndarray:
    eye = np.eye(D)
    sc = tracer.from_arrays(q, q=eye, k=eye, v=eye, rope=dict(base=base, offset=offset, angles=angles))
    return tracer.run(sc)["h0.q_rot"]


@pytest.mark.parametrize("reference", [hand_written, llama])
@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_float32_angles_match_pytorch_far_into_the_text_and_exact_ones_do_not(reference, base):
    q = np.random.default_rng(0).normal(size=(6, D))
    offset = 4093
    want = reference(q, np.arange(offset, offset + 6), base)
    exact = np.abs(rotated(q, offset, base, "exact") - want).max()
    single = np.abs(rotated(q, offset, base, "float32") - want).max()
    assert exact > 3e-5                  # the angle rounded to float32 is off by up to p·2⁻²⁴ rad
    assert single < 5e-7 and single < exact / 100   # left: cos and sin in float32, rarely an ulp of θ


def test_near_the_start_both_agree_and_the_default_stays_exact():
    q = np.random.default_rng(1).normal(size=(4, D))
    want = hand_written(q, np.arange(4), 10000.0)
    assert np.abs(rotated(q, 0, 10000.0, "exact") - want).max() < 1e-6
    eye = np.eye(D)
    sc = tracer.from_arrays(q, q=eye, k=eye, v=eye, rope=dict(offset=4093))
    assert "angles" not in sc.rope
    theta = 10000.0 ** (-np.arange(0, D, 2) / D)      # float64 all the way, as before
    p = 4093 + np.arange(4)[:, None]
    c, s = np.cos(p * theta), np.sin(p * theta)
    want = np.hstack([q[:, :D // 2] * c - q[:, D // 2:] * s, q[:, :D // 2] * s + q[:, D // 2:] * c])
    np.testing.assert_allclose(tracer.run(sc)["h0.q_rot"], want, rtol=0, atol=1e-12)


def test_a_scenario_file_says_angles_and_a_wrong_word_is_named(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text('x = [[1, 0], [0, 1]]\n[weights]\nq = [[1, 0], [0, 1]]\nk = [[1, 0], [0, 1]]\n'
                    'v = [[1, 0], [0, 1]]\n[rope]\noffset = 5000\nangles = "float32"\n')
    trace = tracer.run(str(path))
    theta = np.float32(1.0)                         # pair 0 of d = 2: θ = 1 exactly
    want = np.float64(np.float32(5001) * theta)      # the angle of the second token, in float32
    assert trace["h0.q_rot"][1, 1] == pytest.approx(np.cos(want), abs=1e-15)
    assert "formed in float32" in trace.explain("h0.q_rot", 1, 1)
    path.write_text(path.read_text().replace('"float32"', '"float16"'))
    with pytest.raises(tracer.ScenarioError, match=r"rope\.angles.*\"exact\" or \"float32\""):
        tracer.load_scenario(str(path))
