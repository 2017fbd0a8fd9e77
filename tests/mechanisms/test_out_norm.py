"""A norm of the attention's output (Gemma 2 and 3, OLMo 2; mechanisms/out_norm.py): its numbers
against an RMS norm written here, in both layouts and both presets, its keys and their refusals,
its refusal beside [decode], and its gain among the exports' given inputs. (With every other
mechanism: test_together.py; its checkpoint families: test_model_families.py.)"""
from __future__ import annotations

import numpy as np
import pytest

import tracer

X = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
W_O = np.array([[1.0, 2.0], [3.0, -1.0]])
GAIN = np.array([2.0, 0.5])


def layer(layout: str = "rows", **keys) -> tracer.Scenario:
    """One head reading x as it is, W_O after it, then the output's norm."""
    t = (lambda m: np.asarray(m).T) if layout == "columns" else (lambda m: np.asarray(m))
    return tracer.from_arrays(t(X), t(np.eye(2)), t(np.eye(2)), t(np.eye(2)), t(W_O), layout=layout,
                              mask="causal", **{"out_norm": dict(gain=GAIN, eps=1e-6), **keys})


def rms_normed(y: np.ndarray, gain: np.ndarray, eps: float) -> np.ndarray:
    return y / np.sqrt((y * y).mean(axis=1, keepdims=True) + eps) * gain


@pytest.mark.parametrize("layout", ["rows", "columns"])
@pytest.mark.parametrize("preset", ["exact", "by-hand"])
def test_the_output_normed_as_written_here(layout, preset):
    trace = tracer.run(layer(layout), preset)
    out = trace.rows("out")
    np.testing.assert_allclose(trace.rows("out_norm"), rms_normed(out, GAIN, 1e-6), rtol=1e-12)
    np.testing.assert_allclose(out, trace.rows("h0.z") @ W_O, rtol=1e-12)
    assert trace.step("out_norm").inputs == ("out",)
    assert "O ÷ RMS(O)·g" in trace.step("out_norm").formula
    row, col = (0, 1) if layout == "rows" else (1, 0)   # token 0, feature 1, as the layout writes it
    assert "squares; the gain of feature 1" in trace.explain("out_norm", row, col)


def test_the_residual_adds_the_normed_output():
    trace = tracer.run(layer(residual=dict(norm="none")))
    np.testing.assert_allclose(trace.rows("residual"), X + trace.rows("out_norm"), rtol=1e-15)
    assert trace.step("residual").inputs == ("x", "out_norm")


@pytest.mark.parametrize("value, message", [
    (dict(eps=1.5), r"^out_norm\.eps: expected a number from 0 to 1"),
    (dict(gain=[1.0, 2.0, 3.0]), r"^out_norm\.gain: expected vectors of 2 numbers \(d_out\)"),
    (dict(kind="layer"), r"^out_norm\.kind: expected \"rms\""),
    (dict(scale=2.0), r"^out_norm\.scale: unknown field"),
    ("rms", r"^out_norm: expected a table with kind, gain and eps"),
])
def test_bad_keys_are_named(value, message):
    with pytest.raises(tracer.ScenarioError, match=message):
        tracer.from_arrays(X, np.eye(2), np.eye(2), np.eye(2), W_O, out_norm=value)


def test_refused_beside_decode():
    with pytest.raises(tracer.ScenarioError, match=r"^out_norm: expected no \[decode\] section with it"):
        layer(decode=1)


def test_its_gain_is_a_given_input_of_the_exports(tmp_path):
    from tracer.export import write_export
    path = tmp_path / "o.npz"
    write_export(tracer.run(layer()), path)
    with np.load(path, allow_pickle=False) as npz:
        np.testing.assert_array_equal(npz["given/out_norm.gain"], GAIN[None, :])
