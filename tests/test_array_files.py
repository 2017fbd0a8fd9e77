"""Matrices from files beside the scenario (`x = "inputs.npy"`, a weight as a .csv, one file per
head): the numbers arrive bit for bit and give the attention plain NumPy computes; a bad file is
one line naming the scenario, the field and what was expected; `show --given` prints them."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tracer
from tracer.scenario import arrays
from tui.cli import main

MAIN = """
tokens = ["a", "b", "c"]
x = "x.npy"
[weights]
q = "wq.csv"
k = ["wk0.npy", "wk1.csv"]
v = "wv.npy"
o = "wo.csv"
"""


def softmax_rows(s):
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def save_csv(path, a):
    path.write_text("\n".join(",".join(repr(float(v)) for v in row) for row in a) + "\n", encoding="utf-8")


def folder_with_arrays(tmp_path, rng):
    x, wq = rng.standard_normal((3, 4)), rng.standard_normal((2, 4, 2))   # two heads
    wk, wv, wo = rng.standard_normal((2, 4, 2)), rng.standard_normal((2, 4, 3)), rng.standard_normal((6, 4))
    np.save(tmp_path / "x.npy", x)
    save_csv(tmp_path / "wq.csv", wq[0])
    np.save(tmp_path / "wk0.npy", wk[0])
    save_csv(tmp_path / "wk1.csv", wk[1])
    np.save(tmp_path / "wv.npy", wv)                          # 3-D: one matrix per head
    save_csv(tmp_path / "wo.csv", wo)
    (tmp_path / "s.toml").write_text(MAIN.replace('q = "wq.csv"', 'q = ["wq.csv", "wq1.npy"]'), encoding="utf-8")
    np.save(tmp_path / "wq1.npy", wq[1].astype(np.float32))   # any float dtype; kept as float64 here
    return tmp_path / "s.toml", x, wq, wk, wv, wo


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_arrays_from_files_arrive_bit_for_bit_and_attend_as_numpy_does(tmp_path_factory, seed):
    path, x, wq, wk, wv, wo = folder_with_arrays(tmp_path_factory.mktemp("arrays"), np.random.default_rng(seed))
    trace = tracer.run(tracer.load_scenario(path), "exact")
    np.testing.assert_array_equal(trace.rows("x"), x)          # 17 significant digits, none lost
    wq1 = wq[1].astype(np.float32).astype(np.float64)
    zs = []
    for h, w_q in enumerate((wq[0], wq1)):
        q, k, v = x @ w_q, x @ wk[h], x @ wv[h]
        zs.append(softmax_rows(q @ k.T / np.sqrt(2)) @ v)
        np.testing.assert_allclose(trace.rows(f"h{h}.z"), zs[-1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(trace.rows("out"), np.concatenate(zs, axis=1) @ wo, rtol=1e-12, atol=1e-12)


def test_show_given_prints_the_given_matrices(tmp_path, capsys):
    path = tmp_path / "s.toml"
    np.save(tmp_path / "x.npy", np.array([[1.0, 0.5], [0.0, 2.0]]))
    path.write_text('x = "x.npy"\n[weights]\nq = [[1, 0], [0, 1]]\nk = "k.csv"\nv = [[2, 0], [0, 3]]\n', encoding="utf-8")
    (tmp_path / "k.csv").write_text("1,2\n3,4\n", encoding="utf-8")
    assert main(["show", str(path), "--given"]) == 0
    out = capsys.readouterr().out
    blocks = {b.splitlines()[0].split("  (")[0]: b.splitlines()[2:] for b in out.split("\n\n")[1:]}
    assert list(blocks) == ["X", "W_Q (head 0)", "W_K (head 0)", "W_V (head 0)"]
    assert [row.split()[1:] for row in blocks["X"]] == [["1", "0.5"], ["0", "2"]]
    assert [row.split()[1:] for row in blocks["W_K (head 0)"]] == [["1", "2"], ["3", "4"]]
    assert "h0.weights" not in out                                   # steps only with --step
    assert main(["show", str(path), "--given", "--step", "h0.weights"]) == 0
    assert "h0.weights  Attention weights" in capsys.readouterr().out


def bad(tmp_path, capsys, field_value: str, files=None) -> str:
    """The one error line of `show` on a scenario whose x (or a weight) is `field_value`."""
    for name, write in (files or {}).items():
        write(tmp_path / name)
    path = tmp_path / "s.toml"
    body = {"x": f"x = {field_value}\n[weights]\nq = [[1], [0]]\nk = [[1], [0]]\nv = [[1], [0]]\n"}
    path.write_text(body["x"], encoding="utf-8")
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"attnsim: error: {path}: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def pickled(path):
    np.save(path, np.array([[{"a": 1}, 2]], dtype=object), allow_pickle=True)


@pytest.mark.parametrize("value,files,expected", [
    ('"missing.npy"', {}, r"x: 'missing.npy' does not exist beside the scenario"),
    ('"x.txt"', {"x.txt": lambda p: p.write_text("1,2")}, r"x: expected a matrix, or a path to a \.npy or \.csv file"),
    ('"d.npy"', {"d.npy": lambda p: p.mkdir()}, r"x: 'd.npy' is not a regular file"),
    ('"x.npy"', {"x.npy": pickled}, r"x: 'x.npy' holds object values; expected numbers"),
    ('"x.npy"', {"x.npy": lambda p: np.save(p, np.ones((2, 2), bool))}, r"x: 'x.npy' holds bool values"),
    ('"x.npy"', {"x.npy": lambda p: np.save(p, np.ones((1, 2, 2, 2)))}, r"x: 'x.npy' has shape \(1, 2, 2, 2\)"),
    ('"x.npy"', {"x.npy": lambda p: np.save(p, np.ones((2, 2, 2)))}, r"x: expected a non-empty 2-D array, got shape \(2, 2, 2\)"),
    ('"x.npy"', {"x.npy": lambda p: np.save(p, np.array([[1.0, np.nan]]))}, r"x\[0\]\[1\]: expected a finite number"),
    ('"x.npy"', {"x.npy": lambda p: p.write_bytes(b"\x93NUMPY junk")}, r"x: 'x.npy' is not a \.npy file"),
    ('"x.npy"', {"x.npy": lambda p: np.save(p, np.ones((2, 3)))}, r"weights.q: expected a 3 × d_k matrix .*d_model = 3 from x"),
    ('"x.csv"', {"x.csv": lambda p: p.write_text("1,0\n0,abc\n")}, r"x\[1\]\[1\]: expected a number, got a string \('abc'\) \('x.csv', line 2\)"),
    ('"x.csv"', {"x.csv": lambda p: p.write_text("1,0\nnan,1\n")}, r"x\[1\]\[0\]: expected a finite number"),
    ('"x.csv"', {"x.csv": lambda p: p.write_text("1,0\n1\n")}, r"x\[1\]: expected 2 numbers like row 0, got 1"),
    ('"x.csv"', {"x.csv": lambda p: p.write_text("\n\n")}, r"x: 'x.csv' holds no numbers"),
    ('"x.csv"', {"x.csv": lambda p: p.write_bytes(b"1,\xff\n")}, r"x: 'x.csv' is not UTF-8 text"),
])
def test_a_bad_array_file_is_one_line_naming_the_field(tmp_path, capsys, value, files, expected):
    assert re.search(expected, bad(tmp_path, capsys, value, files))


def test_a_file_larger_than_the_bound_is_refused_before_it_is_read(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(arrays, "MAX_ARRAY_BYTES", 100)
    err = bad(tmp_path, capsys, '"x.npy"', {"x.npy": lambda p: np.save(p, np.ones((2, 100)))})
    assert "x: 'x.npy' is larger than" in err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_pipe_is_refused_without_blocking(tmp_path, capsys):
    assert "is not a regular file" in bad(tmp_path, capsys, '"p.npy"', {"p.npy": lambda p: os.mkfifo(p)})


def test_a_weight_file_error_names_the_weight_and_head(tmp_path, capsys):
    (tmp_path / "s.toml").write_text('x = [[1, 0]]\n[weights]\nq = [[1], [0]]\nk = ["k0.csv", "k1.csv"]\nv = [[1], [0]]\n')
    (tmp_path / "k0.csv").write_text("1\n0\n")
    assert main(["show", str(tmp_path / "s.toml")]) == 2
    assert "weights.k[1]: 'k1.csv' does not exist beside the scenario" in capsys.readouterr().err


def test_the_readme_documents_array_files():
    from pathlib import Path
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert 'x = "inputs.npy"' in readme and "show FILE --given" in readme
