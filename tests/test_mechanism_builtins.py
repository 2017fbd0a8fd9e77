"""The built-ins that teach today's mechanisms (CONTRACT §13): each against the NumPy layer of
mechanisms_reference (read from the file with tomllib, not the package), under both presets, and the
numbers each lesson states, worked out here by hand."""
from __future__ import annotations

import math
import tomllib
from fractions import Fraction

import numpy as np
import pytest

import tracer
from mechanisms_reference import reference
from tracer.scenario import scenarios_dir

BUILTINS = ("qk_norm", "softcap", "alibi", "streaming", "rope_scaling", "rope_scaling_plain", "rope_scaling_linear",
            "rope_scaling_yarn")


def arrays(name: str) -> tuple[dict, str]:
    """The file's layer as the reference's keywords (rows layout), and its mask."""
    data = tomllib.loads((scenarios_dir() / f"{name}.toml").read_text(encoding="utf-8"))
    w = data["weights"]
    heads = lambda m: [np.array(a, float) for a in m] if np.ndim(m) == 3 else [np.array(m, float)]  # noqa: E731
    a = dict(x=np.array(data["x"], float), q=heads(w["q"]), k=heads(w["k"]), v=heads(w["v"]))
    if "q_norm" in w:
        a.update(q_norm=[np.array(w["q_norm"], float)] * len(a["q"]), k_norm=[np.array(w["k_norm"], float)] * len(a["k"]),
                 qk_norm_eps=w.get("norm_eps", 1e-6))
    if "rope" in data:
        r = dict(data["rope"])
        kind = r.pop("scaling", None)
        keys = {k: r.pop(k) for k in list(r) if k not in ("base", "style", "offset", "positions")}
        a["rope"] = dict(style="half", **r, **({"scaling": dict(type=kind, **keys)} if kind else {}))
    for key in ("softcap", "alibi"):
        if key in data:
            a[key] = data[key]
    return a, data.get("mask", "none")


@pytest.mark.parametrize("name", BUILTINS)
@pytest.mark.parametrize("preset", ["exact", "by-hand"])
def test_each_builtin_matches_numpy(name, preset):
    a, mask = arrays(name)
    trace = tracer.run(name, preset)
    ref = reference(a, mask, by_hand=preset == "by-hand")
    for sid, want in ref.items():
        np.testing.assert_allclose(trace.rows(sid), want, rtol=1e-12, atol=1e-12, err_msg=f"{name} {sid}")


def fractions(trace, sid: str, row: int) -> list[Fraction]:
    return [Fraction(float(v)).limit_denominator(1000) for v in trace.rows(sid)[row]]


def test_qk_norm_lesson():
    t = tracer.run("qk_norm")   # by-hand
    np.testing.assert_array_equal(t.rows("h0.q_norm")[0], t.rows("h0.q_norm")[1])   # cat and CAT alike
    assert t.rows("h0.scores").max() == pytest.approx(8, rel=1e-15)                 # 2 × 1 × 4, not 64
    np.testing.assert_array_equal(np.diag(t.rows("h0.scaled")), 4)                  # ⌊8 ÷ 2⌋, never 3
    assert fractions(t, "h0.weights", 2)[:3] == [Fraction(1, 5), Fraction(1, 5), Fraction(3, 5)]
    assert fractions(t, "h0.weights", 3) == [Fraction(1, 14), Fraction(1, 14), Fraction(3, 14), Fraction(9, 14)]
    assert "= 4 ÷ √(16) × 2 = 2" in t.explain("h0.q_norm", 1, 0)


def test_softcap_lesson():
    t = tracer.run("softcap")
    np.testing.assert_array_equal(t.rows("h0.scaled")[0], [1, 4, 10, 20])
    np.testing.assert_allclose(t.rows("h0.capped")[0], 5 * np.tanh(np.array([1, 4, 10, 20]) / 5), rtol=1e-15)
    assert [round(v, 2) for v in t.rows("h0.capped")[0]] == [0.99, 3.32, 4.82, 5.0]
    w = t.rows("h0.weights")[0]
    uncapped = np.exp([1, 4, 10, 20]) / np.exp([1, 4, 10, 20]).sum()
    assert uncapped[3] > 0.9999 and 0.4 < w[2] < w[3] < 0.5   # the top two now share the weight


def test_alibi_lesson():
    t = tracer.run("alibi")   # by-hand: five equal words, slopes 2 and 1
    assert fractions(t, "h1.weights", 4) == [Fraction(3 ** k, 121) for k in range(5)]
    assert fractions(t, "h0.weights", 3)[:4] == [Fraction(9 ** k, 820) for k in range(4)]
    assert t.rows("h0.biased")[4, 0] == t.rows("h0.scaled")[4, 0] - 2 * 4
    assert "2 − 1·(4 − 1) = 2 − 3 = −1" in t.explain("h1.biased", 4, 1)


def test_streaming_lesson():
    t = tracer.run("streaming")
    allowed = t.rows("h0.masked") > -math.inf
    assert allowed[:, 0].all() and (allowed.sum(axis=1) <= 3).all()
    assert allowed.sum(axis=1).tolist() == [1, 2, 3, 3, 3, 3]
    window = tracer.run("streaming", mask="sliding:2")
    assert (window.rows("h0.weights")[2:, 0] == 0).all() and (t.rows("h0.weights")[2:, 0] > 0).all()


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
