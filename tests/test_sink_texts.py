"""A sink in the words: the sums are the row's powers plus the sink's power (named, with its value,
since h0.exp has no cell for it), the weights add up to 1 − the sink's share, the share is labelled
`sink` (not Σ) in show and in pictures and drawn on the weights' ramp, and the stable powers say
that their max includes the sink's logit. Numbers from NumPy here, not from the tracer."""
from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import tracer
from tui.cli import main

SINK = 1.0   # the sinks built-in's logit; its scores below are those its lesson tells


def reference(preset: str):
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
    e, own, sums = reference(preset)
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
    e, own, sums = reference("by-hand")
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
