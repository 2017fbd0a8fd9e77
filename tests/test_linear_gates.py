"""What a hybrid model puts around the recurrence (tracer/mechanisms/linear/gates.py) against
transformers' own modules and functions: the causal convolution and its SiLU, the gated RMS norms
of Gated DeltaNet (SiLU) and Kimi Delta Attention (σ), the decay from A_log and dt_bias."""
from __future__ import annotations

import numpy as np
import pytest

from tracer.mechanisms.linear.gates import causal_conv, gated_decay, gated_rms_norm, output_gate, sigmoid, softplus

torch = pytest.importorskip("torch")
qwen3_next = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")
olmo = pytest.importorskip("transformers.models.olmo_hybrid.modeling_olmo_hybrid")
kimi = pytest.importorskip("transformers.models.kimi_linear.modeling_kimi_linear")
RNG = np.random.default_rng(7)


@pytest.mark.parametrize("n, size", [(1, 4), (3, 4), (9, 2), (6, 1)])
def test_causal_conv_is_transformers_depthwise_conv_and_silu(n, size):
    x, w = RNG.normal(size=(n, 5)), RNG.normal(size=(5, size))
    theirs = qwen3_next.causal_conv1d_fn(torch.tensor(x.T[None]), torch.tensor(w), None, activation="silu")
    np.testing.assert_allclose(causal_conv(x, w), theirs[0].numpy().T, rtol=1e-12, atol=1e-14)


def test_the_first_tokens_see_zeros_before_the_text():
    x, w = np.ones((3, 1)), np.array([[2.0, 3.0, 5.0]])
    pre = np.array([5.0, 8.0, 10.0])                        # w's last tap on token t, then earlier taps
    np.testing.assert_allclose(causal_conv(x, w)[:, 0], pre * sigmoid(pre))


@pytest.mark.parametrize("module, gate, eps", [(qwen3_next.Qwen3NextRMSNormGated, "silu", 1e-6),
                                               (olmo.OlmoHybridRMSNormGated, "silu", 1e-5),
                                               (kimi.KimiLinearRMSNormGated, "sigmoid", 1e-5)])
def test_gated_norms_are_the_families_own(module, gate, eps):
    o, z, gain = RNG.normal(size=(7, 6)), 3 * RNG.normal(size=(7, 6)), RNG.uniform(0.5, 1.5, size=6)
    norm = module(6, eps=eps).double()
    with torch.no_grad():
        norm.weight.copy_(torch.tensor(gain))
        theirs = norm(torch.tensor(o), torch.tensor(z)).numpy()
    np.testing.assert_allclose(gated_rms_norm(o, z, gain, eps, gate), theirs, rtol=1e-6, atol=1e-8)


def test_decay_is_exp_of_minus_a_times_softplus():
    a, a_log, dt = 4 * RNG.normal(size=(5, 3)), RNG.normal(size=3), RNG.normal(size=3)
    g = -torch.tensor(a_log).exp() * torch.nn.functional.softplus(torch.tensor(a) + torch.tensor(dt))
    alpha = gated_decay(a, a_log, dt)
    np.testing.assert_allclose(alpha, g.exp().numpy(), rtol=1e-12)
    assert ((alpha > 0) & (alpha <= 1)).all()
    np.testing.assert_allclose(softplus(np.array([-800.0, 0.0, 800.0])), [0.0, np.log(2), 800.0])


def test_output_gate_multiplies_each_head_and_the_base_gives_fractions():
    z, logits = np.array([[2.0, -4.0]]), np.array([[1.0, -1.0]])
    gate, gated = output_gate(z, logits, base=3)
    assert gate.tolist() == [[0.75, 0.25]] and gated.tolist() == [[1.5, -1.0]]
    np.testing.assert_allclose(output_gate(z, logits)[0], 1 / (1 + np.exp(-logits)))
    assert sigmoid(np.array([-1000.0, 1000.0])).tolist() == [0.0, 1.0]
