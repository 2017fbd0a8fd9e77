"""The softmax layers' output gate (Qwen3-Next, Qwen3.5; mechanisms/output_gate.py): the gated_attention
lesson to the fraction (by hand the sigmoid is base 3's softmax of (u, 0)), generated heads against
NumPy's sigmoid with the bias, concat joining the gated outputs, and the gate's refusals."""
from __future__ import annotations

import tomllib
from fractions import Fraction as F

import numpy as np
import pytest

import tracer
from tracer.scenario import scenarios_dir
from tui.cli import main


def exact(a) -> list:
    return [[F(float(x)).limit_denominator(1000) for x in row] for row in np.asarray(a)]


def test_gated_attention_by_hand():
    data = tomllib.loads((scenarios_dir() / "gated_attention.toml").read_text(encoding="utf-8"))
    x = [[F(v) for v in row] for row in data["x"]]
    mul = lambda a, b: [[sum(r[i] * b[i][j] for i in range(len(b))) for j in range(len(b[0]))] for r in a]  # noqa: E731
    q, k, v, u = (mul(x, data["weights"][key]) for key in ("q", "k", "v", "gate"))
    z = []
    for t in range(3):   # causal, scores ⌊q·k ÷ 1⌋ (d_k = 2), powers 3^s, normalised
        powers = [F(3) ** sum(a * b for a, b in zip(q[t], k[s])) for s in range(t + 1)]
        z.append([sum(p * v[s][j] for s, p in enumerate(powers)) / sum(powers) for j in range(2)])
    sigma = lambda w: F(3) ** w / (F(3) ** w + 1) if w >= 0 else 1 / (1 + F(3) ** -w)  # noqa: E731
    gate = [[sigma(w) for w in row] for row in u]
    trace = tracer.run("gated_attention")
    assert exact(trace["h0.z"]) == z and exact(trace["h0.gate"]) == gate
    assert exact(trace["h0.gated"]) == [[a * b for a, b in zip(zr, gr)] for zr, gr in zip(z, gate)]
    assert exact(trace["h0.gated"])[0] == [F(3, 2), F(1, 4)]   # the lesson's words: half and a quarter of (3, 1)


def test_generated_heads_with_bias_and_concat_against_numpy():
    rng = np.random.default_rng(3)
    x, wq, wk, wv = rng.normal(size=(4, 5)), rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5, 2))
    wg, bg, wo = rng.normal(size=(2, 5, 2)), rng.normal(size=(2, 2)), rng.normal(size=(4, 5))
    trace = tracer.run(tracer.from_arrays(x, list(wq), list(wk), list(wv), o=wo, gate=list(wg), b_gate=list(bg),
                                          mask="causal"))
    joined = []
    for h in range(2):
        s = (x @ wq[h]) @ (x @ wk[h]).T / np.sqrt(3) + np.triu(np.full((4, 4), -np.inf), 1)
        w = np.exp(s - s.max(axis=1, keepdims=True))
        z = (w / w.sum(axis=1, keepdims=True)) @ (x @ wv[h])
        gate = 1 / (1 + np.exp(-(x @ wg[h] + bg[h])))
        np.testing.assert_allclose(trace[f"h{h}.gate"], gate, rtol=1e-12)
        joined.append(z * gate)
    np.testing.assert_allclose(trace["concat"], np.concatenate(joined, axis=1), rtol=1e-12)
    np.testing.assert_allclose(trace["out"], np.concatenate(joined, axis=1) @ wo, rtol=1e-12)


def test_columns_layout_takes_the_gate_transposed():
    sc = tracer.load_scenario("gated_attention")
    cols = tracer.from_arrays(sc.x.T, sc.w_q[0].T, sc.w_k[0].T, sc.w_v[0].T, gate=sc.w_gate[0].T, layout="columns",
                              mask="causal", arithmetic="by-hand")
    np.testing.assert_array_equal(tracer.run(cols)["h0.gated"], tracer.run(sc)["h0.gated"].T)


@pytest.mark.parametrize("keys,message", [
    (dict(b_gate=[1.0, 2.0]), "weights.bgate: expected a gate (weights.gate) for its bias"),
    (dict(gate=np.ones((3, 2))), "weights.gate: expected 2 × 2 (d_model × d_v), got 3 × 2"),
    (dict(gate=np.ones((2, 2)), linear=dict(rule="decay")), "weights.gate: expected no gate with [linear]"),
])
def test_refusals(keys, message):
    with pytest.raises(tracer.ScenarioError) as info:
        tracer.from_arrays(np.eye(2), np.eye(2), np.eye(2), np.eye(2), mask="causal", **keys)
    assert str(info.value).startswith(message)


def test_show_prints_the_gated_step(capsys):
    assert main(["show", "gated_attention", "--step", "h0.gated"]) == 0
    assert "15/8" in capsys.readouterr().out
