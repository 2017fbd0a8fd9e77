"""Llama 4's chunked attention (CONTRACT §17; masks.py, mechanisms/chunked/formula.py): `mask =
"chunked:C"` lets query i see key j iff j ≤ i and ⌊j/C⌋ = ⌊i/C⌋. The mask cell by cell against loops
written here, the built-in `chunked` against Fractions worked by hand, the explanations, the CLI's
show, export and refusals."""
from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest

import tracer
from tui.cli import main

X = [[1, 0], [0, 2], [1, 1], [1, 0], [1, 0], [0, 1], [1, 1], [1, 0]]


def loops(n: int, chunk: int) -> np.ndarray:
    """The chunked mask as plain loops (query × key)."""
    return np.array([[j <= i and j // chunk == i // chunk for j in range(n)] for i in range(n)])


@pytest.mark.parametrize("n, chunk", [(1, 1), (5, 1), (7, 3), (8, 4), (6, 6), (5, 9)])
def test_the_mask_cell_by_cell(n, chunk):
    rng = np.random.default_rng(n * 10 + chunk)
    sc = tracer.from_arrays(rng.normal(size=(n, 3)), np.eye(3), np.eye(3), np.eye(3), mask=f"chunked:{chunk}")
    trace = tracer.run(sc)
    np.testing.assert_array_equal(trace.rows("h0.masked") > -math.inf, loops(n, chunk))
    w = trace.rows("h0.weights")
    assert ((w > 0) == loops(n, chunk)).all() and np.allclose(w.sum(axis=1), 1)


def test_the_columns_layout_writes_the_transpose():
    rows = tracer.run(tracer.from_arrays(np.array(X, float), np.eye(2), np.eye(2), np.eye(2), mask="chunked:3"))
    cols = tracer.run(tracer.from_arrays(np.array(X, float).T, np.eye(2), np.eye(2), np.eye(2), mask="chunked:3",
                                         layout="columns"))
    np.testing.assert_allclose(cols["h0.weights"], rows["h0.weights"].T, rtol=1e-15)


def by_hand(allowed: np.ndarray) -> tuple[list, list]:
    """The built-in's weights and z in Fractions: W_Q = W_K = W_V = I, d_k = 2 so ⌊s ÷ round(√2)⌋ = s, 3^s."""
    x = [[Fraction(a) for a in row] for row in X]
    weights, z = [], []
    for i, q in enumerate(x):
        powers = [Fraction(3) ** int(q[0] * k[0] + q[1] * k[1]) if allowed[i][j] else Fraction(0)
                  for j, k in enumerate(x)]
        row = [p / sum(powers) for p in powers]
        weights.append(row)
        z.append([sum(w * k[c] for w, k in zip(row, x)) for c in range(2)])
    return weights, z


def test_the_builtin_lesson_in_fractions():
    trace = tracer.run("chunked")
    assert trace.arithmetic.preset == "by-hand" and trace.scenario.mask == "chunked:4"
    weights, z = by_hand(loops(8, 4))
    for sid, want in (("h0.weights", weights), ("h0.z", z)):
        np.testing.assert_allclose(trace.rows(sid), np.array(want, float), rtol=1e-14, atol=1e-15, err_msg=sid)
    # the numbers the lesson tells: "then" sees only itself, "it" 1/4 and 3/4, "off" repeats "down"
    assert weights[4][4] == 1 and weights[5][4:6] == [Fraction(1, 4), Fraction(3, 4)]
    assert weights[7][4:] == weights[3][:4] == [Fraction(3, 10), Fraction(1, 10), Fraction(3, 10), Fraction(3, 10)]
    causal, _ = by_hand(loops(8, 8))
    assert causal[5][1] == Fraction(1, 2)
    np.testing.assert_allclose(tracer.run("chunked", mask="causal").rows("h0.weights")[5, 1], 0.5, rtol=1e-15)


def test_a_hidden_key_says_which_chunk_it_is_in():
    trace = tracer.run("chunked")
    assert trace.explain("h0.masked", 5, 1).endswith(
        "= −∞   (key cat is in chunk ⌊1/4⌋ = 0, earlier but not in the chunk ⌊5/4⌋ = 1 of query it: masked)")
    assert trace.explain("h0.masked", 2, 5).endswith("(key it comes after query sat: masked)")
    assert trace.step("h0.masked").formula == "S, with −∞ where j > i or ⌊j/4⌋ ≠ ⌊i/4⌋ (chunked)"


def test_show_and_export_from_the_command_line(tmp_path, capsys):
    assert main(["show", "chunked", "--step", "h0.weights"]) == 0
    assert "h0.weights" in capsys.readouterr().out
    assert main(["export", "chunked", "--set", "mask=chunked:2", "-o", str(tmp_path / "c.json")]) == 0
    doc = json.loads((tmp_path / "c.json").read_text(encoding="utf-8"))
    masked = np.array(next(s for s in doc["steps"] if s["id"] == "h0.masked")["data"], dtype=object)
    assert [[cell != "-inf" for cell in row] for row in masked] == loops(8, 2).tolist()


@pytest.mark.parametrize("body, message", [
    ('mask = "chunked:0"\n', "mask: expected chunked:C with a whole number C from 1 to 2147483647 (the tokens of a "
                             "chunk), got a string ('chunked:0')"),
    ('mask = "chunked:x"\n', "mask: expected chunked:C with a whole number C"),
    ('mask = "chunked:4"\n[decode]\nprompt = 2\n', "mask: expected causal with [decode]"),
])
def test_bad_chunks_are_one_line_and_exit_2(tmp_path, capsys, body, message):
    path = tmp_path / "bad.toml"
    mask, _, decode = body.partition("[decode]")
    path.write_text(f"x = [[1, 0], [0, 1], [1, 1]]\n{mask}[weights]\nq = [[1, 0], [0, 1]]\nk = [[1, 0], [0, 1]]\n"
                    f"v = [[1, 0], [0, 1]]\n" + (f"[decode]{decode}" if decode else ""), encoding="utf-8")
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("attnsim: error: ") and message in err and "bad.toml" in err


def test_set_mask_refuses_a_bad_chunk(capsys):
    assert main(["show", "chunked", "--set", "mask=chunked:-1"]) == 2
    assert "mask: expected chunked:C" in capsys.readouterr().err
