"""`attnsim class grade` takes a student's arrays (sNN.npz, as `attnsim check` reads them): each cell
judged to √ε of the array's dtype against the key's exact value; a step left out is unanswered."""
from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from test_cli_errors import cli
from tracer.classroom import printing
from tracer.classroom.make import make_class


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    root = tmp_path_factory.mktemp("npz")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(printing, "write_pdf", lambda path, pages: Path(path).write_bytes(b"%PDF-"))
        return make_class("gpt_causal", 2, root / "class", seed=5).folder   # a mask: −∞ cells


def sheet(folder: Path, sid: str) -> dict:
    """The key's cells of one student as float arrays (what a correct student computes)."""
    key = json.loads((folder / "key.json").read_text(encoding="utf-8"))
    cells = next(s for s in key["students"] if s["id"] == sid)["cells"]
    return {step: np.array([[-np.inf if v == "-inf" else float(Fraction(v)) for v in row] for row in grid])
            for step, grid in cells.items()}


def test_arrays_are_marked_cell_by_cell(klass, tmp_path, capsys):
    right = sheet(klass, "s01")
    total = sum(a.size for a in right.values())
    mine = {step: a.astype(np.float32) for step, a in right.items()}   # float32: within its √ε
    mine["h0.masked"] = np.where(np.isinf(right["h0.masked"]), -1e9, right["h0.masked"])  # −1e9 for −∞: right
    wrong_step = next(s for s in right if s.endswith("weights"))
    mine[wrong_step] = mine[wrong_step].copy()
    mine[wrong_step][1, 0] += 0.25
    np.savez(tmp_path / "s01-ana.npz", **mine)
    partial = {step: a for step, a in sheet(klass, "s02").items() if not step.endswith("z")}
    np.savez(tmp_path / "s02.npz", **partial)
    code, out, err = cli(capsys, "class", "grade", str(klass), str(tmp_path / "s01-ana.npz"), str(tmp_path / "s02.npz"))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"s01 (s01-ana.npz): {total - 1} of {total} right, 1 wrong, 0 unanswered"
    assert lines[1].startswith(f"  {wrong_step} row 1 col 0") and "given " in lines[1]
    z = next(a.size for s, a in sheet(klass, "s02").items() if s.endswith("z"))
    assert f"s02 (s02.npz): {total - z} of {total} right, 0 wrong, {z} unanswered" in out


def test_an_npz_that_is_not_the_sheet_is_refused_in_one_line(klass, tmp_path, capsys):
    np.savez(tmp_path / "s01.npz", **{"h3.weights": np.zeros((2, 2))})
    code, out, err = cli(capsys, "class", "grade", str(klass), str(tmp_path / "s01.npz"))
    assert code == 2 and err.startswith("attnsim: error: ") and "h3.weights: is not a step of s01's sheet" in err
    (tmp_path / "s02.npz").write_text("step,row,col,value\n")
    code, _, err = cli(capsys, "class", "grade", str(klass), str(tmp_path / "s02.npz"))
    assert code == 2 and "is not an npz" in err
