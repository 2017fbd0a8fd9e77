"""A gainless RMS norm of the values (Gemma 4, CONTRACT §17; mechanisms/v_norm.py): `[weights] v_norm
= true`, the step h{h}.v_norm after h{h}.v (kv{g}.v_norm when grouped), v ÷ √(mean(v²) + eps) with
QK-norm's eps, against NumPy written here: both presets, both layouts, grouped heads, the fused and
online paths; its keys and refusals; the exports."""
from __future__ import annotations

import json

import numpy as np
import pytest

import tracer
from tracer.export import write_export

X = np.array([[1.0, 2.0, 0.0], [3.0, -1.0, 1.0], [0.0, 1.0, 2.0], [2.0, 2.0, -2.0]])
W_Q = [np.eye(3)[:, :2], np.eye(3)[:, 1:]]
W_K = [np.eye(3)[:, :2]]
W_V = [np.array([[1.0, 2.0], [0.0, 1.0], [1.0, -1.0]])]


def scenario(layout: str = "rows", **keys) -> tracer.Scenario:
    """Two query heads over one key/value group (so kv0.v_norm), causal."""
    t = (lambda m: np.asarray(m).T) if layout == "columns" else (lambda m: np.asarray(m))
    return tracer.from_arrays(t(X), [t(w) for w in W_Q], [t(w) for w in W_K], [t(w) for w in W_V], layout=layout,
                              mask="causal", **{"v_norm": True, **keys})


def reference(by_hand: bool, eps: float = 1e-6) -> dict:
    """Every value and head output as the formulas give them, in the rows orientation."""
    v = X @ W_V[0]
    v_norm = v / np.sqrt((v * v).mean(axis=1, keepdims=True) + eps)
    out = {"kv0.v": v, "kv0.v_norm": v_norm}
    for h, w_q in enumerate(W_Q):
        s = (X @ w_q) @ (X @ W_K[0]).T
        s = np.floor(s / 1) if by_hand else s / np.sqrt(2)   # by hand: ⌊s ÷ round(√2)⌋
        s = np.where(np.tril(np.ones_like(s)) > 0, s, -np.inf)
        e = 3.0 ** s if by_hand else np.exp(s - s.max(axis=1, keepdims=True))
        out[f"h{h}.z"] = e / e.sum(axis=1, keepdims=True) @ v_norm
    return out


@pytest.mark.parametrize("layout", ["rows", "columns"])
@pytest.mark.parametrize("preset", ["exact", "by-hand"])
def test_the_values_normed_as_written_here(layout, preset):
    trace = tracer.run(scenario(layout), preset)
    for sid, want in reference(preset == "by-hand").items():
        np.testing.assert_allclose(trace.rows(sid), want, rtol=1e-12, atol=1e-14, err_msg=sid)
    ids = [s.id for s in trace.steps]
    assert ids.index("kv0.v_norm") == ids.index("kv0.v") + 1
    assert trace.step("h1.z").inputs == ("h1.weights", "kv0.v_norm")
    assert trace.step("kv0.v_norm").formula == "V ÷ RMS(V), per token (no gain)"
    row, col = (1, 0) if layout == "rows" else (0, 1)   # token 1, feature 0, as the layout writes it
    assert trace.explain("kv0.v_norm", row, col).endswith("(the mean of t2's 2 squares; no gain)")


@pytest.mark.parametrize("engine, algorithm", [("fused", "standard"), ("stages", "online"), ("fused", "online")])
def test_the_fused_and_online_paths_give_the_same_outputs(engine, algorithm):
    want = reference(False)
    trace = tracer.run(scenario(), engine=engine, algorithm=algorithm, block=2)
    for h in (0, 1):
        np.testing.assert_allclose(trace.rows(f"h{h}.z"), want[f"h{h}.z"], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(trace.rows("kv0.v_norm"), want["kv0.v_norm"], rtol=1e-12)


def test_its_eps_is_qk_norms_key():
    eps = 0.5
    trace = tracer.run(scenario(qk_norm_eps=eps))
    np.testing.assert_allclose(trace.rows("kv0.v_norm"), reference(False, eps)["kv0.v_norm"], rtol=1e-12)
    assert scenario(qk_norm_eps=eps).describe()["v_norm"] == {"eps": eps}
    assert "v_norm" not in tracer.load_scenario("by_hand").describe()


@pytest.mark.parametrize("change, message", [
    (dict(v_norm="yes"), r"^weights\.v_norm: expected true or false"),
    (dict(qk_norm_eps=2.0), r"^weights\.norm_eps: expected a number from 0 to 1"),
    (dict(decode=2), r"^weights\.v_norm: expected no \[decode\] section with it \(.*a norm of the values or an output gate\)"),
])
def test_bad_keys_and_decode_are_refused_naming_them(change, message):
    with pytest.raises(tracer.ScenarioError, match=message):
        scenario(**change)


def test_a_row_of_zeros_under_eps_0_is_refused_naming_the_eps():
    zero = tracer.from_arrays(np.array([[0.0, 0.0], [1.0, 2.0]]), np.eye(2), np.eye(2), np.eye(2), v_norm=True,
                              qk_norm_eps=0)
    for engine in ("stages", "fused"):
        with pytest.raises(tracer.ScenarioError, match=r"^weights\.norm_eps: is 0, and head 0's value of token 0"):
            tracer.run(zero, engine=engine)


def test_a_scenario_file_says_it(tmp_path):
    path = tmp_path / "v.toml"
    path.write_text('x = [[1, 2], [3, 4]]\n[weights]\nq = [[1, 0], [0, 1]]\nk = [[1, 0], [0, 1]]\n'
                    'v = [[1, 0], [0, 1]]\nv_norm = true\nnorm_eps = 0.25\n', encoding="utf-8")
    v = np.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(tracer.run(str(path))["h0.v_norm"], v / np.sqrt((v * v).mean(1, keepdims=True) + 0.25),
                               rtol=1e-12)


def test_the_exports_hold_the_step_and_its_eps(tmp_path):
    trace = tracer.run(scenario())
    write_export(trace, tmp_path / "v.npz")
    write_export(trace, tmp_path / "v.json")
    with np.load(tmp_path / "v.npz", allow_pickle=False) as npz:
        np.testing.assert_array_equal(npz["kv0.v_norm"], trace["kv0.v_norm"])
    doc = json.loads((tmp_path / "v.json").read_text(encoding="utf-8"))
    assert doc["scenario"]["v_norm"] == {"eps": 1e-6}
    assert [s["id"] for s in doc["steps"]].count("kv0.v_norm") == 1
