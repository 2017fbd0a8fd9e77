"""Linear attention in the engine (mechanisms/linear, CONTRACT §16): the `[linear]` section and
from_arrays(linear=...) traced through decay, beta, state, o, implicit and z, against the recurrence
written here on matrices (Fractions for the lessons, floats for generated layers) and the implicit
weights found by feeding one-hot values through it; the lessons' hand-worked numbers; the refusals
as the CLI prints them; show, explain and the exports of the new steps."""
from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from fractions import Fraction as F
from pathlib import Path

import numpy as np
import pytest

import tracer
from tracer.scenario import scenarios_dir
from tui.cli import main


def recurrence(q, k, v, alpha, beta, rule):
    """(states, o) as §16 writes the rules with the state d_k × d_v: decay S ← diag(α)·S + k·vᵀ;
    delta and kda S ← (I − β·k·kᵀ)·diag(α)·S + β·k·vᵀ; o_t = S_tᵀ·q_t. Any numbers (Fractions too)."""
    n, d_k = k.shape
    eye = np.identity(d_k, dtype=object)
    S = np.zeros((d_k, v.shape[1]), dtype=object) + 0
    states, o = [], []
    for t in range(n):
        a = np.diag(np.resize(np.array(alpha[t], dtype=object), d_k))
        kk, vv = k[t].reshape(d_k, 1), v[t].reshape(1, -1)
        if rule == "decay":
            S = a.dot(S) + kk.dot(vv)
        else:
            S = (eye - beta[t] * kk.dot(kk.T)).dot(a).dot(S) + beta[t] * kk.dot(vv)
        states.append(S)
        o.append(S.T.dot(q[t]))
    return np.array(states), np.array(o)


def implicit(q, k, alpha, beta, rule):
    """A with o = A·v: column s is the output when token s's value is 1 and every other is 0."""
    n = len(k)
    return np.array([recurrence(q, k, np.identity(n, dtype=object)[:, s:s + 1], alpha, beta, rule)[1][:, 0]
                     for s in range(n)]).T


def lesson(name: str) -> dict:
    return tomllib.loads((scenarios_dir() / f"{name}.toml").read_text(encoding="utf-8"))


def exact(a) -> np.ndarray:
    return np.vectorize(lambda x: F(x).limit_denominator(10 ** 6), otypes=[object])(np.asarray(a, dtype=float))


# ------------------------------------------------------------------ the lessons, to the fraction

@pytest.fixture(scope="module")
def delta_rule():
    return tracer.run("delta_rule")


def test_delta_rule_is_the_worked_example_to_the_fraction(delta_rule):
    data = lesson("delta_rule")
    x = exact(data["x"])
    q, k, v = (x.dot(exact(data["weights"][key])) for key in ("q", "k", "v"))
    alpha = [[a] for a in exact(data["linear"]["decay"])]
    beta = list(exact(data["linear"]["beta"]))
    states, o = recurrence(q, k, v, alpha, beta, "delta")   # by hand: ⌊q ÷ round(√2)⌋ = q
    A = implicit(q, k, alpha, beta, "delta")
    assert (exact(delta_rule["h0.state"]) == states.reshape(8, 2)).all()
    assert (exact(delta_rule["h0.o"]) == o).all() and (exact(delta_rule["h0.z"]) == o).all()
    assert (exact(delta_rule["h0.implicit"]) == A).all() and (A.dot(v) == o).all()
    # the plan's hand-worked table: x2 reads x1's value with weight −1/2; rows sum to 1, 0, 3/2, 3/4
    assert A[1, 0] == F(-1, 2) and list(A.sum(axis=1)) == [1, 0, F(3, 2), F(3, 4)]
    assert [list(r) for r in states[3]] == [[F(9, 4), F(1, 4)], [2, 2]]


def test_delta_rule_exact_preset_divides_q_by_root_two():
    t = tracer.run("delta_rule", arithmetic="exact")
    data = lesson("delta_rule")
    x = np.array(data["x"], float)
    q, k, v = (x @ np.array(data["weights"][key], float) for key in ("q", "k", "v"))
    alpha = [[a] for a in data["linear"]["decay"]]
    states, o = recurrence(q / np.sqrt(2), k, v, alpha, data["linear"]["beta"], "delta")
    np.testing.assert_allclose(t["h0.o"], o.astype(float), rtol=1e-14)
    np.testing.assert_allclose(t["h0.state"], states.reshape(8, 2).astype(float), rtol=1e-14)
    np.testing.assert_allclose(t["h0.implicit"] @ v, t["h0.o"], rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("preset", ["by-hand", "exact"])
def test_linear_decay_halves_and_thirds_and_normalised_is_alibi(preset):
    t = tracer.run("linear_decay", arithmetic=preset)   # d_k = 1: both presets divide by 1
    assert list(exact(t["h0.state"][:, 0])) == [1, F(3, 2), F(7, 4), F(15, 8), F(31, 16)]
    assert list(exact(t["h1.state"][:, 0])) == [1, F(4, 3), F(13, 9), F(40, 27), F(121, 81)]
    assert list(exact(t["h0.implicit"][4])) == [F(1, 16), F(1, 8), F(1, 4), F(1, 2), 1]
    last = exact(t["h1.implicit"][4])
    assert list(last) == [F(1, 81), F(1, 27), F(1, 9), F(1, 3), 1]
    # ALiBi's head of slope 1 by hand: scores all equal, minus the distance d, powers 3^−d, then normalised
    powers = [F(1, 3 ** (4 - j)) for j in range(5)]
    assert list(last / last.sum()) == [p / sum(powers) for p in powers]


# ------------------------------------------------------------------ generated layers, every rule

@pytest.mark.parametrize("rule", ["delta", "decay", "kda"])
@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_from_arrays_every_rule_and_layout_is_the_recurrence(rule, layout):
    rng = np.random.default_rng(["delta", "decay", "kda"].index(rule))
    n, d, d_k, d_v = 5, 4, 3, 2
    x, wq, wk, wv = rng.normal(size=(n, d)), rng.normal(size=(2, d, d_k)), rng.normal(size=(1, d, d_k)), \
        rng.normal(size=(1, d, d_v))
    alpha = rng.uniform(0.3, 1, size=(2, n, d_k if rule == "kda" else 1))
    beta = rng.uniform(0, 2, size=(2, n))
    section = dict(rule=rule, decay=(alpha if rule == "kda" else alpha[..., 0]).tolist())
    if rule != "decay":
        section["beta"] = beta.tolist()
    t = lambda a: a.T if layout == "columns" else a   # noqa: E731  (columns: one column per token)
    sc = tracer.from_arrays(t(x), [t(w) for w in wq], [t(w) for w in wk], [t(w) for w in wv], layout=layout,
                            linear=section)
    trace = tracer.run(sc)
    for h in range(2):
        q, k, v = x @ wq[h] / np.sqrt(d_k), x @ wk[0], x @ wv[0]   # one key/value group
        states, o = recurrence(q, k, v, alpha[h], beta[h], rule)
        A = implicit(q, k, alpha[h], beta[h], rule)
        np.testing.assert_allclose(trace.rows(f"h{h}.state"), states.reshape(n * d_k, d_v).astype(float), rtol=1e-12)
        np.testing.assert_allclose(trace.rows(f"h{h}.o"), o.astype(float), rtol=1e-12)
        np.testing.assert_allclose(trace.rows(f"h{h}.implicit"), A.astype(float), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(trace.rows(f"h{h}.decay"), alpha[h], rtol=0)
    assert ("h0.beta" in trace) == (rule != "decay") and "h0.scores" not in trace and "h0.weights" not in trace
    assert [s.id for s in trace.steps if s.head == 0] == ["h0.q", "h0.decay"] + (["h0.beta"] if rule != "decay" else []) \
        + ["h0.state", "h0.o", "h0.implicit", "h0.z"]


# ------------------------------------------------------------------ refusals, one line each

DELTA = (scenarios_dir() / "delta_rule.toml").read_text(encoding="utf-8")
REFUSALS = [
    ("decay = [1, 1, 0.5, 1]", "decay = [1, 0, 0.5, 1]", "linear.decay: expected each in (0, 1]"),
    ("beta = [1, 0.5, 1, 0.5]", "beta = [1, 3, 1, 0.5]", "linear.beta: expected each in [0, 2]"),
    ('rule = "delta"', 'rule = "gated"', "linear.rule: expected one of 'delta', 'decay', 'kda', got 'gated'"),
    ("decay = [1, 1, 0.5, 1]", "decay = [1, 1, 0.5]", "linear.decay: expected a number, a list of 4 (one a token)"),
    ('mask = "causal"', 'mask = "none"', 'mask: expected "causal" or no mask with [linear]'),
    ('mask = "causal"', 'mask = "causal"\nalibi = true', "alibi: expected no ALiBi with [linear]"),
    ("[weights]", "[weights]\nsinks = [0.5]", "weights.sinks: expected no sinks with [linear]"),
    ('mask = "causal"', 'mask = "causal"\nsoftcap = 5.0', "softcap: expected no softcap with [linear]"),
    ("[linear]", "[rope]\nbase = 10000.0\n\n[linear]", "rope: expected no [rope] with [linear]"),
    ("[linear]", "[defaults]\nsoftmax_base = 2\n\n[linear]", "defaults.softmax_base: has no meaning in a "
     "linear layer"),
    ("[linear]", "[defaults]\nalgorithm = \"online\"\n\n[linear]", "defaults.algorithm: has no meaning in a linear layer"),
]


@pytest.mark.parametrize("old,new,message", REFUSALS, ids=[r[2].split(":")[0] for r in REFUSALS])
def test_each_refusal_is_one_line_naming_file_and_field(tmp_path, capsys, old, new, message):
    path = tmp_path / "lesson.toml"
    path.write_text(DELTA.replace(old, new, 1), encoding="utf-8")
    out = tmp_path / "out.json"
    assert main(["export", str(path), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"attnsim: error: {path}: {message}" + err.split(message, 1)[1] and err.count("\n") == 1, err
    assert not out.exists()


def test_a_refusal_leaves_no_traceback_in_a_fresh_process(tmp_path):
    path = tmp_path / "lesson.toml"
    path.write_text(DELTA.replace('mask = "causal"', 'mask = "none"'), encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", "import sys; from tui.cli import main; sys.exit(main(sys.argv[1:]))",
                           "show", str(path)], capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert done.returncode == 2 and done.stderr.startswith("attnsim: error: ") and "Traceback" not in done.stderr


def test_a_softmax_key_set_for_a_run_is_refused(capsys):
    assert main(["show", "delta_rule", "--set", "softmax_base=2"]) == 2
    err = capsys.readouterr().err
    assert "softmax_base: has no meaning in a linear layer ([linear])" in err and err.count("\n") == 1


def test_from_arrays_refuses_with_the_same_words():
    with pytest.raises(tracer.ScenarioError, match=r"^linear\.beta: the decay rule adds"):
        tracer.from_arrays(np.eye(2), np.eye(2), np.eye(2), np.eye(2), linear=dict(rule="decay", beta=0.5))
    with pytest.raises(tracer.ScenarioError, match=r"^mask: expected \"causal\" with \[linear\]"):
        tracer.run(tracer.from_arrays(np.eye(2), np.eye(2), np.eye(2), np.eye(2), linear=dict(rule="decay")),
                   mask="none")


# ------------------------------------------------------------------ show, explain, exports

def test_show_prints_the_negative_weight(capsys):
    assert main(["show", "delta_rule", "--step", "h0.implicit"]) == 0
    out = capsys.readouterr().out
    assert "−1/2" in out and "query × key" in out
    # 2 × 2 state against a softmax layer of the same shapes: a key and a value of 2 a token
    assert "keeps: the state keeps 4 numbers whatever the length; a softmax layer's cache grows by 4 a token: " \
        "as many at 1 token (this text's 4: 16 in the cache)" in out


def test_explain_uses_the_numbers(delta_rule):
    state = delta_rule.explain("h0.state", 2, 1)   # row 0 of the state after x2, column 1
    assert "prediction Sᵀk = (2, 0)" in state and "error v − Sᵀk = (0, 2) − (2, 0) = (−2, 2)" in state
    assert "1/2 × 1 × 2 = 1" in state
    weight = delta_rule.explain("h0.implicit", 1, 0)
    assert "= −1/2" in weight and "x2's row sums to 0" in weight
    assert delta_rule.explain("h0.o", 1, 0).endswith("q̂ = ⌊q ÷ 1⌋ (by hand, d_k = 2))")


@pytest.mark.parametrize("fmt", ["json", "npz", "csv", "md"])
def test_exports_hold_the_new_steps(tmp_path, fmt, delta_rule):
    out = tmp_path / f"delta.{fmt}"
    assert main(["export", "delta_rule", "-o", str(out)]) == 0
    if fmt == "json":
        doc = json.loads(out.read_text(encoding="utf-8"))
        steps = {s["id"]: s for s in doc["steps"]}
        assert steps["h0.state"]["axes"] == ["token·d_k", "d_v"] and steps["h0.state"]["shape"] == [8, 2]
        assert steps["h0.implicit"]["data"][1][0] == -0.5 and doc["scenario"]["linear"]["rule"] == "delta"
        assert doc["scenario"]["linear"]["keeps"] == {"state": 4, "per_token": 4, "break_even": 1.0}
    elif fmt == "npz":
        with np.load(out, allow_pickle=False) as z:
            np.testing.assert_array_equal(z["h0.state"], delta_rule["h0.state"])
    elif fmt == "csv":
        assert "h0.implicit,1,0,-0.5" in out.read_text(encoding="utf-8")
    else:
        text = out.read_text(encoding="utf-8")
        assert "h0.state" in text and "−1/2" in text
        # the sheet's arithmetic is the layer's: q̂ by hand, no scores and no softmax's powers to take
        line = next(line for line in text.splitlines() if line.startswith("Layout:"))
        assert "q̂ = ⌊q ÷ 1⌋" in line and "powers 3^s" not in line and "scores ÷" not in line, line


def test_l2_true_norms_q_and_k_by_their_length_before_the_recurrence():
    rng = np.random.default_rng(7)
    x, wq, wk, wv = (rng.normal(size=s) for s in ((4, 3), (3, 2), (3, 2), (3, 2)))
    trace = tracer.run(tracer.from_arrays(x, wq, wk, wv, linear=dict(rule="delta", beta=0.5, l2=True)))
    unit = lambda a: a / np.sqrt((a * a).sum(axis=1, keepdims=True) + 1e-6)   # noqa: E731  (length, not RMS)
    q, k = unit(x @ wq), unit(x @ wk)
    np.testing.assert_allclose(trace["h0.q_unit"], q, rtol=1e-12)
    states, o = recurrence(q / np.sqrt(2), k, x @ wv, [[1]] * 4, [0.5] * 4, "delta")
    np.testing.assert_allclose(trace["h0.o"], o.astype(float), rtol=1e-12)


@pytest.mark.parametrize("rule", ["delta", "decay", "kda"])
def test_decoding_carries_the_state_and_each_row_is_the_full_traces(rule):
    rng = np.random.default_rng(11)
    n, p = 5, 2
    section = dict(rule=rule, decay=rng.uniform(0.4, 1, size=(2, n, 3) if rule == "kda" else (2, n)), l2=rule == "delta")
    if rule != "decay":
        section["beta"] = rng.uniform(0, 2, size=(2, n))
    keys = dict(x=rng.normal(size=(n, 4)), q=list(rng.normal(size=(2, 4, 3))), k=list(rng.normal(size=(1, 4, 3))),
                v=list(rng.normal(size=(1, 4, 2))), o=rng.normal(size=(4, 4)), residual=dict(norm="none"), linear=section)
    whole, decoded = tracer.run(tracer.from_arrays(**keys)), tracer.run(tracer.from_arrays(**keys, decode=p))
    assert not any(s.kind in ("k_cache", "v_cache", "implicit") for s in decoded.steps if s.id.startswith("t"))
    for t in range(p, n):
        for h in range(2):
            np.testing.assert_allclose(decoded[f"t{t}.h{h}.state"], whole[f"h{h}.state"][t * 3:(t + 1) * 3], rtol=1e-12)
            np.testing.assert_allclose(decoded[f"t{t}.h{h}.z"][0], whole[f"h{h}.z"][t], rtol=1e-12)
        np.testing.assert_allclose(decoded[f"t{t}.residual"][0], whole["residual"][t], rtol=1e-12)
    story = decoded.explain("t2.h0.state", 0, 1)
    assert story.startswith("t2.h0.state[") and "the state after t3" in story


def test_delta_rule_decoded_from_the_prompt_s_state_is_the_worked_example(tmp_path, capsys):
    path = tmp_path / "decoded.toml"
    path.write_text(DELTA.replace("[linear]", "[decode]\nprompt = 2\n\n[linear]"), encoding="utf-8")
    assert main(["show", str(path), "--step", "t3.h0.state", "--step", "t3.h0.o"]) == 0
    out = capsys.readouterr().out
    assert "x4·0           9/4  1/4" in out and "x4         9/4  1/4" in out and "the whole cache" in out


def test_a_heatmap_of_a_linear_layer_draws_its_implicit_weights(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "implicit.svg"
    assert main(["export", "delta_rule", "--figure", "heatmap", "-o", str(out)]) == 0
    assert "heatmap of h0.implicit" in capsys.readouterr().out and out.stat().st_size > 0
