"""The weightless QK-norm of Llama 4 and nanochat (CONTRACT §17; mechanisms/qk_norm.py): `[weights]
q_norm = k_norm = "l2"`, each head's q and k divided by their root mean square with no gain (Llama
4's "L2" norm is an RMS norm: rows of length √d_k, not 1), and `qk_norm_after_rope = true`, the
norm after the rotation (mechanisms/norm_after_rope): against NumPy written apart from the package
(mechanisms_reference), both presets, both engines; the explanations, the keys and refusals."""
from __future__ import annotations

import numpy as np
import pytest

import tracer
from mechanisms_reference import reference, rms, rotate
from tui.cli import main

RNG = np.random.default_rng(34)
X = RNG.normal(size=(5, 4))
W = dict(q=[RNG.normal(size=(4, 4)) for _ in range(2)], k=[RNG.normal(size=(4, 4))], v=[RNG.normal(size=(4, 2))])
ROPE = dict(base=10.0, style="half")


def arrays(after: bool, l2: bool = True) -> dict:
    gains = dict(q_norm="l2", k_norm="l2") if l2 else dict(q_norm=[[1.0, 2, 3, 4]] * 2, k_norm=[[2.0, 1, 1, 3]])
    return dict(x=X, **W, rope=ROPE, qk_norm_after_rope=after, **gains)


@pytest.mark.parametrize("engine", ["stages", "fused"])
@pytest.mark.parametrize("preset", ["exact", "by-hand"])
@pytest.mark.parametrize("after, l2", [(False, True), (True, True), (True, False)])
def test_against_numpy(after, l2, preset, engine):
    a = arrays(after, l2)
    trace = tracer.run(tracer.from_arrays(mask="causal", **a), preset, engine=engine)
    for sid, want in reference(a, "causal", by_hand=preset == "by-hand").items():
        np.testing.assert_allclose(trace.rows(sid), want, rtol=1e-10, atol=1e-12, err_msg=sid)


def test_the_order_of_the_steps_and_what_they_read():
    before = tracer.run(tracer.from_arrays(mask="causal", **arrays(False)))
    after = tracer.run(tracer.from_arrays(mask="causal", **arrays(True)))
    ids = lambda t: [s.id for s in t.steps if s.id.startswith("h0.")]   # noqa: E731
    assert ids(before)[:3] == ["h0.q", "h0.q_norm", "h0.q_rot"] and ids(after)[:3] == ["h0.q", "h0.q_rot", "h0.q_norm"]
    assert after.step("h0.q_norm").inputs == ("h0.q_rot",) and after.step("h0.q_rot").inputs == ("h0.q", "freqs")
    assert after.step("h0.scores").inputs == ("h0.q_norm", "kv0.k_norm")
    assert after.step("kv0.k_norm").formula == "k_rot ÷ RMS(k_rot), per token (RMS over its head's d_k; no gain)"
    # no gain: a rotation keeps the length, the order changes nothing but rounding
    np.testing.assert_allclose(after.rows("h1.weights"), before.rows("h1.weights"), rtol=1e-12)
    q_rot = rotate(X @ W["q"][1], ROPE)
    np.testing.assert_allclose(after.rows("h1.q_norm"), rms(q_rot, 1.0, 1e-6), rtol=1e-12)
    lengths = np.linalg.norm(after.rows("h1.q_norm"), axis=1)
    np.testing.assert_allclose(lengths, 2.0, rtol=1e-6)   # √d_k, not 1


def test_with_a_gain_the_order_matters():
    before = tracer.run(tracer.from_arrays(mask="causal", **arrays(False, l2=False)))
    after = tracer.run(tracer.from_arrays(mask="causal", **arrays(True, l2=False)))
    assert np.abs(after.rows("h0.weights") - before.rows("h0.weights")).max() > 1e-3


def test_the_explanation_has_the_numbers_and_no_gain():
    trace = tracer.run(tracer.from_arrays(mask="causal", **arrays(True)))
    q_rot = trace.rows("h0.q_rot")[2]
    text = trace.explain("h0.q_norm", 2, 1)
    assert f"{q_rot[1]:.4g}".replace("-", "−") in text and "no gain; turned first, normed after" in text
    assert "length √d_k = 2, not 1" in text and "×" not in text.partition("(")[0]


@pytest.mark.parametrize("weights, message", [
    ('q_norm = "l2"\nk_norm = [1, 1]\n', 'weights.k_norm: expected "l2" as q_norm is "l2", got a list'),
    ('q_norm = "rms"\nk_norm = "l2"\n', "weights.q_norm: expected a gain (d_k numbers) or \"l2\", got a string ('rms')"),
    ('q_norm = "l2"\nk_norm = "l2"\nnorm_scope = "all"\n', 'weights.norm_scope: expected "head" with q_norm = "l2"'),
    ("qk_norm_after_rope = true\n", "weights.qk_norm_after_rope: expected q_norm and k_norm in [weights] (nothing to "
                                    "norm after the rotation)"),
    ('q_norm = "l2"\nk_norm = "l2"\nqk_norm_after_rope = true\n', "weights.qk_norm_after_rope: expected a [rope] "
                                                                   "section (no rotation to norm after)"),
    ('q_norm = "l2"\nk_norm = "l2"\nqk_norm_after_rope = 1\n', "weights.qk_norm_after_rope: expected true or false"),
])
def test_bad_keys_are_one_line_and_exit_2(tmp_path, capsys, weights, message):
    path = tmp_path / "bad.toml"
    path.write_text("x = [[1, 0], [0, 1]]\n[weights]\nq = [[1, 0], [0, 1]]\nk = [[1, 0], [0, 1]]\n"
                    f"v = [[1, 0], [0, 1]]\n{weights}", encoding="utf-8")
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("attnsim: error: ") and message in err


def test_a_scenario_file_and_its_export(tmp_path, capsys):
    path = tmp_path / "nanochat.toml"
    path.write_text('x = [[1, 2], [3, 4], [0, 1]]\nmask = "causal"\n[rope]\nbase = 10\n[weights]\n'
                    'q = [[1, 0], [0, 1]]\nk = [[0, 1], [1, 0]]\nv = [[1, 0], [0, 1]]\nq_norm = "l2"\nk_norm = "l2"\n'
                    "qk_norm_after_rope = true\nnorm_eps = 0\n", encoding="utf-8")
    a = dict(x=np.array([[1.0, 2], [3, 4], [0, 1]]), q=[np.eye(2)], k=[np.eye(2)[::-1]], v=[np.eye(2)],
             rope=dict(base=10.0, style="half"), q_norm="l2", k_norm="l2", qk_norm_after_rope=True, qk_norm_eps=0)
    trace = tracer.run(str(path))
    for sid, want in reference(a).items():
        np.testing.assert_allclose(trace.rows(sid), want, rtol=1e-12, err_msg=sid)
    assert main(["export", str(path), "-o", str(tmp_path / "n.npz")]) == 0
    with np.load(tmp_path / "n.npz", allow_pickle=False) as npz:
        np.testing.assert_array_equal(npz["h0.q_norm"], trace["h0.q_norm"])
