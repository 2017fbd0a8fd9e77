"""`attnsim check SCENARIO ANSWERS.npz [--json]` (CONTRACT §19): exit 0 when every given step
matches (an export of the trace itself does), 1 at a difference (a wrong shape too), 2 for bad input
in one line; the report and --json's object; what the numbers look like when no variant matches."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tracer
from tui.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_an_export_of_the_trace_matches_itself(tmp_path, capsys):
    path = str(tmp_path / "all.npz")
    assert run(capsys, "export", "by_hand", "-o", path)[0] == 0
    code, out, err = run(capsys, "check", "by_hand", path)
    steps = len(tracer.run("by_hand").steps)
    assert (code, err) == (0, "") and f": {steps} of {steps} given steps match" in out


def test_a_difference_is_reported_with_its_cell_its_story_and_its_cause(tmp_path, capsys):
    trace = tracer.run("by_hand")   # columns layout, by-hand arithmetic: ⌊S ÷ 2⌋
    path = tmp_path / "mine.npz"
    np.savez(path, **{"h0.scores": trace["h0.scores"], "h0.scaled": trace["h0.scores"]})   # forgot to scale
    code, out, _ = run(capsys, "check", "by_hand", str(path))
    assert code == 1
    lines = out.splitlines()
    assert lines[0].endswith(": 1 of 2 given steps match")
    assert lines[1] == "first difference: h0.scaled row 0, col 0"
    assert lines[2].split() == ["yours:", f"{trace['h0.scores'][0, 0]:g}"]
    assert lines[3].split() == ["expected:", f"{trace['h0.scaled'][0, 0]:g}"]
    assert lines[4] == "  how:       " + trace.explain("h0.scaled", 0, 0)
    assert lines[5].startswith("  likely cause: your scores are not scaled")
    assert lines[6] == "steps: h0.scores ✓  h0.scaled ✗"
    code, out, _ = run(capsys, "check", "by_hand", str(path), "--json")
    doc = json.loads(out)
    assert code == 1 and set(doc) == {"scenario", "matching", "given", "first", "cause"}
    assert set(doc["first"]) == {"step", "row", "col", "yours", "expected", "explain", "cause"}
    assert (doc["scenario"], doc["matching"], doc["cause"], doc["first"]["step"]) == ("by_hand", 1, "no_scale", "h0.scaled")
    assert doc["first"]["expected"] == float(trace["h0.scaled"][0, 0])


def test_json_when_everything_matches(tmp_path, capsys):
    path = tmp_path / "w.npz"
    np.savez(path, **{"h0.weights": tracer.run("by_hand")["h0.weights"].astype(np.float32)})
    code, out, _ = run(capsys, "check", "by_hand", str(path), "--json")
    assert code == 0 and json.loads(out) == {"scenario": "by_hand", "matching": 1, "given": 1, "first": None,
                                             "cause": None}


def test_shapes_and_looks(tmp_path, capsys):
    trace = tracer.run("by_hand")
    cases = {   # what you gave → the cause named
        "transposed_step": {"h0.scores": trace["h0.scores"].T},            # rows layout in a columns scenario
        "shape": {"h0.weights": trace["h0.weights"][:2]},
        "wrong_scale": {"h0.scaled": trace["h0.scores"] / 5},   # d_k = 3: neither √3 nor 3
    }
    for cause, arrays in cases.items():
        path = tmp_path / f"{cause}.npz"
        np.savez(path, **arrays)
        code, out, _ = run(capsys, "check", "by_hand", str(path), "--json")
        assert (code, json.loads(out)["cause"]) == (1, cause)
    np.savez(tmp_path / "sums.npz", **{"h0.sums": trace["h0.sums"].ravel()})   # (4,) for 1 × 4: the same cells
    assert run(capsys, "check", "by_hand", str(tmp_path / "sums.npz"))[0] == 0


def test_columns_that_sum_to_1_are_named_whatever_else_is_wrong(capsys, tmp_path):
    sc = tracer.load_scenario("gpt_causal")
    trace = tracer.run(sc)
    s = trace["h0.scores"] / 2.5                                            # a wrong scale, and then
    m = np.where(np.tril(np.ones(s.shape, bool)), s, -np.inf)
    w = np.exp(m - m.max(axis=0)) / np.exp(m - m.max(axis=0)).sum(axis=0)   # softmax over the queries
    np.savez(tmp_path / "w.npz", **{"h0.weights": w})
    code, out, _ = run(capsys, "check", "gpt_causal", str(tmp_path / "w.npz"), "--json")
    assert (code, json.loads(out)["cause"]) == (1, "softmax_axis")


@pytest.mark.parametrize("content, message", [
    (b"step,row,col,value\n", "is not an npz"),
    (None, "is not a step of by_hand"),
    ("npy", "is not an npz"),
    ("strings", "holds <U1 values; expected numbers"),
    ("empty", "holds no step"),
])
def test_bad_answers_exit_2_in_one_line_naming_what(tmp_path, capsys, content, message):
    path = tmp_path / "bad.npz"
    if content is None:
        np.savez(path, **{"h7.weights": np.zeros((4, 4))})
    elif content == "npy":
        np.save(path, np.zeros((4, 4)))
        path = tmp_path / "bad.npz.npy"
    elif content == "strings":
        np.savez(path, **{"h0.weights": np.array([["a"]])})
    elif content == "empty":
        np.savez(path)
    else:
        path.write_bytes(content)
    code, out, err = run(capsys, "check", "by_hand", str(path))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"attnsim: error: {path}: ") and message in err
    if content is None:
        assert "h7.weights" in err


def test_a_missing_file_exits_2(tmp_path, capsys):
    code, _, err = run(capsys, "check", "by_hand", str(tmp_path / "nowhere.npz"))
    assert code == 2 and "is missing" in err


def test_a_fifo_or_a_zip_bomb_is_refused_before_it_is_read(tmp_path, capsys):
    """A FIFO would hang open(); an npz whose header declares more than memory holds is refused
    from the header, before anything is inflated."""
    import io
    import zipfile
    fifo = tmp_path / "pipe.npz"
    os.mkfifo(fifo)
    code, _, err = run(capsys, "check", "by_hand", str(fifo))
    assert code == 2 and "is not a regular file" in err
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (10**7, 10**6)})
    bomb = tmp_path / "bomb.npz"
    with zipfile.ZipFile(bomb, "w") as z:
        z.writestr("h0.weights.npy", header.getvalue())
    code, _, err = run(capsys, "check", "by_hand", str(bomb))
    assert code == 2 and "more than this machine can hold" in err and err.count("\n") == 1


def test_the_installed_command(tmp_path):
    path = tmp_path / "w.npz"
    np.savez(path, **{"h0.weights": tracer.run("by_hand")["h0.weights"] + 0.01})
    done = subprocess.run([sys.executable, "-m", "tui", "check", "by_hand", str(path), "--json"],
                          capture_output=True, text=True, env=os.environ, timeout=120)
    assert done.returncode == 1 and json.loads(done.stdout)["first"]["step"] == "h0.weights"
