"""The additive mask (mechanisms/score_bias.py): in a scenario file (one matrix, or one per head, in
the columns layout too), explained in the masked step, a bad one refused in one line naming it, the
online algorithm refusing it, and raw powers of a query it hides entirely being zero weights, not
an underflow. (Through tracer.sdpa's float masks against PyTorch: test_sdpa.py.)"""
from __future__ import annotations

import numpy as np
import pytest

import tracer


def test_the_additive_mask_is_explained_in_the_masked_step():
    torch = pytest.importorskip("torch")
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    trace = tracer.sdpa(q, q, q, torch.tensor([[0.5, -torch.inf], [-2.0, 0.0]], dtype=torch.float64)).trace()
    assert "additive mask" in trace.step("h0.masked").formula
    assert trace.explain("h0.masked", 0, 0) == ("h0.masked[query t0, key t0] = 0.7071 + M[t0,t0] = 0.7071 + 0.5 = "
                                                 "1.207   (the additive mask's number for this query and key)")
    assert "the additive mask M is −∞" in trace.explain("h0.masked", 0, 1)
    assert "= 0 + M[t1,t0] = 0 − 2 = −2" in trace.explain("h0.masked", 1, 0)


def test_score_bias_in_a_scenario_file_columns_layout(tmp_path):
    path = tmp_path / "bias.toml"   # key × query in the columns layout, like its scores
    path.write_text('layout = "columns"\nx = [[1, 0, 2], [0, 1, 1]]\nscore_bias = [[0, 1, -inf], [0.5, 0, 0], '
                    '[-inf, -inf, 0]]\n[weights]\nq = [[1, 0], [0, 1]]\nk = [[1, 0], [0, 1]]\nv = [[1, 0], [0, 1]]\n')
    trace = tracer.run(str(path))
    x = np.array([[1, 0, 2], [0, 1, 1]], float).T      # tokens as rows
    s = x @ x.T / np.sqrt(2) + np.array([[0, 1, -np.inf], [0.5, 0, 0], [-np.inf, -np.inf, 0]]).T
    a = np.exp(s - s.max(axis=1, keepdims=True))
    np.testing.assert_allclose(trace["h0.weights"], (a / a.sum(axis=1, keepdims=True)).T, atol=1e-15)


@pytest.mark.parametrize("bias, extra, message", [
    (np.ones((3, 3), bool), {}, r"^score_bias: expected a 3 × 3 matrix .*; a 0/1 mask goes in mask"),
    (np.zeros((2, 3)), {}, r"^score_bias: expected a 3 × 3 matrix \(query × key\), or 1 of them .*got shape \(2, 3\)"),
    ([[0.0, np.nan, 0.0]] * 3, {}, r"^score_bias\[0\]\[1\]: expected a number or -inf"),
    (np.zeros((3, 3)), {"decode": 2, "mask": "causal"}, r"^score_bias: expected no \[decode\] section with it"),
])
def test_a_bad_score_bias_is_one_line_naming_it(bias, extra, message):
    x = np.eye(3)
    with pytest.raises(tracer.ScenarioError, match=message):
        tracer.from_arrays(x, q=x, k=x, v=x, score_bias=bias, **extra)


def test_the_online_algorithm_refuses_an_additive_mask():
    x = np.eye(3)
    sc = tracer.from_arrays(x, q=x, k=x, v=x, score_bias=np.zeros((3, 3)))
    with pytest.raises(tracer.ScenarioError, match=r"^algorithm: expected standard with score_bias"):
        tracer.run(sc, algorithm="online")


def test_raw_powers_of_a_query_the_additive_mask_hides_entirely_are_zero_weights_not_an_underflow():
    x = np.eye(3)
    bias = np.zeros((3, 3))
    bias[1] = -np.inf
    with pytest.warns(tracer.AttentionWarning, match=r"^t2 \(head 0\): every key is masked"):
        trace = tracer.run(tracer.from_arrays(x, q=x, k=x, v=x, score_bias=bias), stable=False)
    assert (trace["h0.weights"][1] == 0).all() and trace["h0.weights"][0].sum() == pytest.approx(1)
