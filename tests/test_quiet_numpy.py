"""No warning of NumPy's or numba's reaches a user: raw powers that overflow end in the one error
line naming the step, on the small-trace NumPy path as on the others, with nothing before it."""
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import tracer
from tracer.errors import ScenarioError

ROOT = Path(__file__).resolve().parents[1]
LARGE_SCORES = """
name = "large_scores"
layout = "rows"
tokens = ["a", "b"]
x = [[60, 0], [0, 60]]
[weights]
q = [[1, 0], [0, 1]]
k = [[1, 0], [0, 1]]
v = [[1, 0], [0, 1]]
"""
RAW = [("by-hand", ()), ("exact", ()), ("exact", ("dtype=float32",)), ("by-hand", ("algorithm=online",))]


@pytest.fixture(scope="module")
def large_scores(tmp_path_factory):
    path = tmp_path_factory.mktemp("quiet") / "large_scores.toml"
    path.write_text(LARGE_SCORES, encoding="utf-8")
    return path


@pytest.mark.parametrize("preset,sets", RAW)
def test_overflowing_raw_powers_warn_nothing_through_the_library(large_scores, preset, sets):
    overrides = dict(s.split("=") for s in ("stable=false", *sets))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ScenarioError, match="leaves float.*range"):
            tracer.run(tracer.load_scenario(large_scores), preset, **overrides)
    assert [str(w.message) for w in caught if not issubclass(w.category, tracer.AttentionWarning)] == []


@pytest.mark.parametrize("preset,sets", RAW[:2])
def test_overflowing_raw_powers_print_one_line_through_the_cli(large_scores, preset, sets):
    argv = ["show", str(large_scores), "--arithmetic", preset, "--set", "stable=false", "--step", "h0.weights"]
    done = subprocess.run([sys.executable, "-m", "tui", *argv], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("attnsim: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "h0.exp" in done.stderr and "Warning" not in done.stderr
