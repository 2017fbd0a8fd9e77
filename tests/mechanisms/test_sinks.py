"""Attention sinks (gpt-oss; mechanisms/sinks.py): written by hand against a softmax with one more
column written here, the built-in's lesson, the refusals beside [decode] and the online algorithm,
and the sink in the words: the sums are the row's powers plus the sink's power (named, with its
value, since h0.exp has no cell for it), the weights add up to 1 − the sink's share, the share is
labelled `sink` (not Σ) in show and in pictures and drawn on the weights' ramp, and the stable
powers say that their max includes the sink's logit. Numbers from NumPy here, not from the tracer.
(gpt-oss checkpoints: test_mixture_of_experts.py.)"""
from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tracer
from tui.cli import main


# ------------------------------------------------------------------- sinks written by hand
def reference(x, wq, wk, wv, sinks, preset, causal):
    """Each head's tokens' weights, the sink's share and z, with the sink as one more column."""
    out = []
    for h, s_h in enumerate(sinks):
        s = (x @ wq[h]) @ (x @ wk[h]).T
        c = math.sqrt(wq.shape[2])
        s = s / c if preset == "exact" else np.floor(s / max(1, round(c)))
        if causal:
            s = np.where(np.tril(np.ones_like(s)) > 0, s, -np.inf)
        full = np.concatenate([s, np.full((len(s), 1), s_h)], axis=1)
        e = np.exp(full - full.max(axis=1, keepdims=True)) if preset == "exact" else 3.0 ** full
        p = e / e.sum(axis=1, keepdims=True)
        out.append((p[:, :-1], p[:, -1], p[:, :-1] @ (x @ wv[h])))
    return out


ints = st.integers(-2, 2)


@settings(max_examples=20, deadline=None)
@given(st.data(), st.sampled_from(["exact", "by-hand"]), st.sampled_from(["rows", "columns"]), st.booleans())
def test_sinks_against_numpy(data, preset, layout, causal):
    n, d, heads, dk = data.draw(st.integers(1, 4)), 3, data.draw(st.integers(1, 3)), 4
    mat = lambda *shape: np.array(data.draw(st.lists(ints, min_size=math.prod(shape), max_size=math.prod(shape))),  # noqa: E731
                                   dtype=float).reshape(shape)
    x, wq, wk, wv = mat(n, d), mat(heads, d, dk), mat(heads, d, dk), mat(heads, d, 2)
    sinks = [data.draw(st.sampled_from([-1.0, 0.0, 0.5, 2.0, 5.0])) for _ in range(heads)]
    t = (lambda m: m.T) if layout == "columns" else (lambda m: m)
    sc = tracer.from_arrays(t(x), [t(w) for w in wq], [t(w) for w in wk], [t(w) for w in wv], layout=layout,
                            mask="causal" if causal else None, sinks=sinks, arithmetic=preset)
    trace = tracer.run(sc)
    for h, (w, sink, z) in enumerate(reference(x, wq, wk, wv, sinks, preset, causal)):
        np.testing.assert_allclose(trace.rows(f"h{h}.weights"), w, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(trace.rows(f"h{h}.sink")[:, 0], sink, rtol=1e-12)
        np.testing.assert_allclose(trace.rows(f"h{h}.z"), z, rtol=1e-12, atol=1e-12)
        assert trace.explain(f"h{h}.sink", 0, 0) and "sink's power" in trace.explain(f"h{h}.sums", 0, 0)


def test_sink_explain_shows_the_numbers():
    sc = tracer.from_arrays([[1, 0], [0, 1]], [[[1, 0], [0, 1]]], [[[1, 0], [0, 1]]], [[[1, 0], [0, 1]]],
                            mask="causal", sinks=[1.0], arithmetic="by-hand")
    trace = tracer.run(sc)
    assert "] = 3^1 ÷ 7 = 3 ÷ 7 = 3/7" in trace.explain("h0.sink", 1, 0)   # powers 1, 3 and the sink's 3
    assert "] = 1 + 3 + 3 = 7   (the h0.exp row, plus the sink's power 3^1 = 3," in trace.explain("h0.sums", 1, 0)


# ------------------------------------------------------------------- the built-in's lesson
def test_sinks_builtin_lesson():
    from fractions import Fraction
    t = tracer.run("sinks")   # by-hand: powers of 3, no max subtracted
    share = lambda sid, row: [Fraction(float(v)).limit_denominator(100) for v in t.rows(sid)[row]]  # noqa: E731
    assert share("h0.weights", 3) == [Fraction(1, 15), Fraction(1, 15), Fraction(3, 5), Fraction(1, 15)]  # sat → cat
    assert share("h0.sink", 3) == [Fraction(1, 5)]
    assert share("h0.weights", 1)[:2] == [Fraction(1, 5)] * 2 and share("h0.sink", 1) == [Fraction(3, 5)]
    np.testing.assert_array_equal(t.rows("h0.z")[1], 0)            # "the" reads nothing
    assert share("h0.sums", 1) == [5] and share("h0.sums", 3) == [15]
    x, w = np.array([[0, 0], [0, 0], [0, 1], [1, 0]], float), {"q": [[2], [0]], "k": [[0], [1]]}
    for preset in ("exact", "by-hand"):
        got = tracer.run("sinks", preset)
        (weights, sink, z), = reference(x, np.array([w["q"]], float), np.array([w["k"]], float), np.eye(2)[None],
                                        [1.0], preset, causal=True)
        np.testing.assert_allclose(got.rows("h0.weights"), weights, rtol=1e-12)
        np.testing.assert_allclose(got.rows("h0.sink")[:, 0], sink, rtol=1e-12)
    assert 0.5 < float(tracer.run("sinks", "exact").rows("h0.sink")[1, 0]) < 0.6   # 1 ÷ (1 + 2/e)


def test_sinks_refused_with_decode_and_online():
    base = dict(x=[[1, 0], [0, 1]], q=[[1, 0], [0, 1]], k=[[1, 0], [0, 1]], v=[[1, 0], [0, 1]], sinks=[0.5])
    with pytest.raises(tracer.ScenarioError, match="weights.sinks: expected no \\[decode\\]"):
        tracer.from_arrays(**base, mask="causal", decode=1)
    with pytest.raises(tracer.ScenarioError, match="algorithm: expected standard with weights.sinks"):
        tracer.run(tracer.from_arrays(**base), algorithm="online")


SINK = 1.0   # the sinks built-in's logit; its scores below are those its lesson tells


def lesson(preset: str):
    """(powers, sink's power, sums) of every query of the sinks built-in, by hand."""
    sc = tracer.load_scenario("sinks")
    x = np.asarray(sc.x, dtype=np.float64)
    s = (x @ sc.w_q[0]) @ (x @ sc.w_k[0]).T
    s = np.where(np.tril(np.ones_like(s)) > 0, s, -np.inf)
    if preset == "by-hand":                      # ⌊s ÷ 1⌋ (d_k = 1), raw powers of 3
        return 3.0 ** s, np.full(len(s), 3.0 ** SINK), (3.0 ** s).sum(1) + 3.0 ** SINK
    shift = np.maximum(s.max(1), SINK)           # the max over the scores and the sink
    e = np.exp(s - shift[:, None])
    own = np.exp(SINK - shift)
    return e, own, e.sum(1) + own


def numbers(text: str) -> list[float]:
    from fractions import Fraction
    return [float(Fraction(t.replace("−", "-"))) for t in re.findall(r"−?\d+(?:\.\d+)?(?:/\d+)?", text)]


@pytest.mark.parametrize("preset", ["by-hand", "exact"])
def test_a_sum_is_the_row_plus_the_sinks_power_named(preset):
    trace = tracer.run("sinks", preset)
    e, own, sums = lesson(preset)
    for q in range(4):
        story = trace.explain("h0.sums", q, 0, fractions=True)
        body, _, note = story.partition("   (")
        terms = numbers(body.split("] = ", 1)[1].split(" = ")[0])   # the terms added, before "= total"
        np.testing.assert_allclose(terms, [*e[q], own[q]], rtol=5e-4)
        np.testing.assert_allclose(numbers(body.split(" = ")[-1])[-1], sums[q], rtol=5e-4)
        assert "the sink's power" in note and "h0.exp" in note
        power = f"3^{SINK:g}" if preset == "by-hand" else "e^(1 − "
        assert power in note


def test_the_texts_say_the_sink_takes_a_share():
    trace = tracer.run("sinks", "exact")
    sums, weights, exp = (trace.step(f"h0.{k}") for k in ("sums", "weights", "exp"))
    assert "sink's power" in sums.formula
    for step in (sums, weights):
        assert "1 − the sink's share" in step.why, step.why
        assert not re.search(r"add up to 1\b(?! −)", step.why), step.why
    assert "sink" in exp.formula and "max" in exp.formula   # the max subtracted includes the sink's logit
    assert "sink" in exp.why
    plain = tracer.run("by_hand")   # without a sink the words stay those of plain softmax
    assert "add up to 1." in plain.step("h0.sums").why and "sink" not in plain.step("h0.weights").why


def test_show_labels_the_share_sink(capsys):
    assert main(["show", "sinks", "--step", "h0.sink"]) == 0
    table = capsys.readouterr().out.split("\nh0.sink  ", 1)[1].splitlines()
    assert "[query × sink, 4 × 1]" in table[0]
    assert table[1].split() == ["query\\sink", "sink"]
    assert "Σ" not in "\n".join(table)
    # the shares, by hand: 3 ÷ (the row's powers + 3)
    e, own, sums = lesson("by-hand")
    assert [row.split()[-1] for row in table[2:6]] == ["3/4", "3/5", "1/2", "1/5"]
    np.testing.assert_allclose(own / sums, [3 / 4, 3 / 5, 1 / 2, 1 / 5])


def test_a_picture_labels_the_share_sink_on_the_weights_ramp(tmp_path):
    pytest.importorskip("matplotlib")
    from tracer.figures import heatmap
    trace = tracer.run("sinks", "exact")
    path = tracer.figure(trace, tmp_path / "sink.svg", ["h0.sink"])
    labels = ["".join(n.itertext()) for n in ET.parse(path).iter("{http://www.w3.org/2000/svg}text")]
    assert "sink" in labels and "Σ" not in labels
    cmap, norm = heatmap._colours(trace.step("h0.sink"), trace["h0.sink"])
    weights_cmap, _ = heatmap._colours(trace.step("h0.weights"), trace["h0.weights"])
    assert cmap.name == weights_cmap.name and norm.vmin == 0   # a share: from 0, as the weights
    assert math.isclose(norm.vmax, float(trace["h0.sink"].max()))
