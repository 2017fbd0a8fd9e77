"""The rotary variants of the dense families of 2026 (CONTRACT §17; mechanisms/rotary): Gemma 4's
proportional rotary (`scaling = "proportional"`, `fraction`, `factor`: the first ⌊f·d_k/2⌋ pairs
(i, i + d_k/2) turn with θ_i = base^(−2i/d_k) ÷ factor, the others stand still) and nanochat's
rotation the other way (`sign = -1`: −p·θ_i), against NumPy written here; refusals."""
from __future__ import annotations

import numpy as np
import pytest

import tracer
from tui.cli import main

RNG = np.random.default_rng(4)
X = RNG.normal(size=(5, 8))


def turned(a: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Pairs (i, i + d/2) of the token at position p turned by p·θ_i."""
    half = a.shape[1] // 2
    angle = np.arange(len(a))[:, None] * theta[None, :]
    x, y = a[:, :half], a[:, half:]
    return np.concatenate([x * np.cos(angle) - y * np.sin(angle), y * np.cos(angle) + x * np.sin(angle)], axis=1)


@pytest.mark.parametrize("fraction, factor, turning", [(0.25, 1.0, 1), (0.5, 2.0, 2), (1.0, 1.0, 4)])
def test_proportional_rotary(fraction, factor, turning):
    rope = dict(base=100.0, scaling=dict(type="proportional", fraction=fraction, factor=factor))
    trace = tracer.run(tracer.from_arrays(X, np.eye(8), np.eye(8), np.eye(8), rope=rope))
    theta = np.array([100.0 ** (-2 * i / 8) / factor if i < turning else 0.0 for i in range(4)])
    np.testing.assert_allclose(trace.rows("freqs")[:, 0], theta, rtol=1e-15)
    np.testing.assert_allclose(trace.rows("h0.q_rot"), turned(X, theta), rtol=1e-12, atol=1e-14)
    if turning < 4:
        assert trace.explain("freqs", 3, 0).endswith(f"(pair 3 of 4 does not turn: proportional rotary turns only the "
                                                     f"first {turning})")


def test_a_file_writes_it_beside_the_base(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text("x = [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]]\n[rope]\nbase = 100\nscaling = \"proportional\"\n"
                    "fraction = 0.5\n[weights]\nq = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]\n"
                    "k = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]\nv = [[1, 0], [0, 1], [0, 0], [0, 0]]\n",
                    encoding="utf-8")
    np.testing.assert_allclose(tracer.run(str(path)).rows("freqs")[:, 0], [1.0, 0.0], rtol=1e-15)


def test_the_other_way_round():
    trace = tracer.run(tracer.from_arrays(X, np.eye(8), np.eye(8), np.eye(8), rope=dict(base=100.0, sign=-1)))
    theta = 100.0 ** (-2 * np.arange(4) / 8)
    np.testing.assert_allclose(trace.rows("h0.q_rot"), turned(X, -theta), rtol=1e-12, atol=1e-14)
    assert np.abs(trace.rows("h0.q_rot") - turned(X, theta)).max() > 0.1
    assert "turned the other way, by −p·θ (nanochat)" in trace.explain("freqs", 1, 0)


@pytest.mark.parametrize("rope, message", [
    ("sign = 2", "rope.sign: expected 1 or -1"),
    ('scaling = "proportional"\nfraction = 0.2', "rope.fraction: expected a number in (0, 1] that leaves a whole "
                                                 "number of turning pairs (of the 2 of d_k = 4), got 0.2"),
    ('scaling = "proportional"\nfraction = 1.5', "rope.fraction: expected a number in (0, 1]"),
    ('scaling = "proportional"', "rope.fraction: missing"),
])
def test_bad_keys(tmp_path, capsys, rope, message):
    path = tmp_path / "bad.toml"
    path.write_text(f"x = [[1, 0, 0, 1], [0, 1, 1, 0]]\n[rope]\n{rope}\n[weights]\nq = [[1, 0, 0, 0], [0, 1, 0, 0], "
                    "[0, 0, 1, 0], [0, 0, 0, 1]]\nk = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]\n"
                    "v = [[1, 0], [0, 1], [0, 0], [0, 0]]\n", encoding="utf-8")
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
