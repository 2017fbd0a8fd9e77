"""Soft-capping (Gemma 2; mechanisms/softcap.py): Gemma 2's cap of 50 on its scores, the lesson's
numbers worked out here, and the fused size falling back to the stage path."""
from __future__ import annotations

import numpy as np
import pytest

import tracer
from mechanisms_reference import layer, reference


def test_gemma_2_caps_attention_scores_at_50():
    pytest.importorskip("transformers")
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


def test_softcap_lesson():
    t = tracer.run("softcap")
    np.testing.assert_array_equal(t.rows("h0.scaled")[0], [1, 4, 10, 20])
    np.testing.assert_allclose(t.rows("h0.capped")[0], 5 * np.tanh(np.array([1, 4, 10, 20]) / 5), rtol=1e-15)
    assert [round(v, 2) for v in t.rows("h0.capped")[0]] == [0.99, 3.32, 4.82, 5.0]
    w = t.rows("h0.weights")[0]
    uncapped = np.exp([1, 4, 10, 20]) / np.exp([1, 4, 10, 20]).sum()
    assert uncapped[3] > 0.9999 and 0.4 < w[2] < w[3] < 0.5   # the top two now share the weight


def test_softcap_and_alibi_at_fused_size_fall_back_to_the_stage_path():
    rng = np.random.default_rng(9)
    a = layer(rng, 512, 4, 4, 4, softcap=2.0, alibi=True, out_norm=False, norm=False, style=None)
    sc = tracer.from_arrays(**a, mask="causal")
    trace = tracer.run(sc, lazy=True)
    assert trace.engine == "stages"
    ref = reference(a)
    for sid in ("h0.capped", "h3.biased", "h2.weights", "residual"):
        np.testing.assert_allclose(trace.rows(sid), ref[sid], rtol=1e-9, atol=1e-9, err_msg=sid)
    np.testing.assert_allclose(tracer.attention(sc), ref["residual"], rtol=1e-9, atol=1e-9)
