"""`[rope] angles = "float32"`: θ_i and p·θ_i formed in float32 as PyTorch models form them. Far
into a text (positions 4000+), the exact angles differ from a float32 PyTorch rotary embedding
(transformers' LlamaRotaryEmbedding, and a hand-written one) by ~1e-4 rad while float32 ones agree."""
from __future__ import annotations

import numpy as np
import pytest

import tracer

torch = pytest.importorskip("torch")

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
