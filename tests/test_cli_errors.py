"""Bad input through the command line: every case exits 2 with one `attnsim: error:` line naming
the file, the field and what was expected; no traceback, and an existing output file untouched."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_bad_inputs import CORPUS, EXPECTED, GOOD, check_message
from tui.cli import main

OLD = "an export written before\n"


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


FIRST_RUN = "attnsim: first run: computing with NumPy while the kernels compile in the background"


def one_error_line(err: str) -> str:
    """The error line, alone but for the first-run notice, which a CLI call on a cold kernel cache
    rightly prints first (seen once in a suite whose worker began before the cache was warm)."""
    if err.startswith(FIRST_RUN):
        err = err.split("\n", 1)[1]
    assert err.startswith("attnsim: error: ") and err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err[len("attnsim: error: "):-1]


@pytest.mark.parametrize("verb", ["show", "validate", "diff"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_through_the_cli(capsys, name, verb):
    path = str(CORPUS / f"{name}.toml")
    code, out, err = cli(capsys, verb, path)
    assert code == 2 and out == ""
    message = one_error_line(err)
    assert message.startswith(f"{path}: ")
    check_message(message[len(path) + 2:], EXPECTED[name])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_export_leaves_the_old_file(capsys, tmp_path, name):
    target = tmp_path / "out.json"
    target.write_text(OLD)
    code, out, err = cli(capsys, "export", str(CORPUS / f"{name}.toml"), "-o", str(target))
    assert code == 2 and out == "" and one_error_line(err)
    assert target.read_text() == OLD and [p.name for p in tmp_path.iterdir()] == ["out.json"]


ARGS = {
    "name with dots": (["show", "../by_hand"], "../by_hand: file: does not exist"),
    "name with a slash": (["show", "a/b"], "a/b: file: does not exist"),
    "dot dot": (["show", ".."], "..: file: is a directory"),
    "unknown name": (["show", "by_hnd"], "scenario: 'by_hnd' is neither a .toml file nor a built-in scenario "
                                         '(did you mean "by_hand"?)'),
    "empty name": (["show", ""], "scenario: expected a built-in name or a path to a .toml file"),
    "unknown step": (["show", "by_hand", "--step", "h0.wieghts"], "--step: unknown step 'h0.wieghts'"),
    "unknown step, export": (["export", "by_hand", "-o", "{out}", "--step", "h9.z"], "--step: unknown step 'h9.z'"),
    "set without =": (["show", "by_hand", "--set", "scale"], "--set: expected KEY=VALUE (e.g. scale=sqrt), got 'scale'"),
    "set unknown key": (["show", "by_hand", "--set", "base=3"], "--set base: unknown key"),
    "set base one": (["show", "by_hand", "--set", "softmax_base=1"], "--set softmax_base: expected e or a number > 1"),
    "set base below one": (["show", "by_hand", "--set", "softmax_base=0.5"], "--set softmax_base: expected e or a number > 1"),
    "set dtype": (["show", "by_hand", "--set", "dtype=float16"], "--set dtype: expected float64 or float32"),
    "set mask word": (["show", "by_hand", "--set", "mask=casual"], "--set mask: expected none, causal"),
    "set mask size": (["show", "by_hand", "--set", "mask=[[1,0],[1,1]]"], "mask: expected a 4 × 4 matrix (key × query), got 2 × 2"),
    "set layout": (["show", "by_hand", "--set", "layout=diagonal"], "--set layout: expected rows or columns"),
    "unknown preset": (["show", "by_hand", "--arithmetic", "by_hand"], "arithmetic: expected a preset, exact or by-hand"),
    "diff preset": (["diff", "by_hand", "--b", "approx"], "--b: expected a preset"),
    "unknown format": (["export", "by_hand", "-o", "{out}", "--format", "xlsx"], "--format: expected one of json, npz, csv, md"),
    "unknown extension": (["export", "by_hand", "-o", "{dir}/out.xlsx"], "--format: expected one of json, npz, csv, md"),
    "missing folder": (["export", "by_hand", "-o", "{dir}/no/such/folder/t.json"], "-o: the folder"),
    "file as folder": (["export", "by_hand", "-o", "{out}/t.json"], "-o: the folder"),
    "directory target": (["export", "by_hand", "-o", "{dir}/sub.json"], "-o: "),
    "explain not numbers": (["show", "by_hand", "--explain", "h0.q", "a", "b"], "--explain: expected ID ROW COL"),
    "explain outside": (["show", "by_hand", "--explain", "h0.q", "7", "0"], "cell: expected row < 3"),
    "unknown option": (["show", "by_hand", "--frobnicate"], "arguments: unrecognized arguments: --frobnicate"),
    "unknown verb": (["frobnicate"], "arguments: argument verb: invalid choice"),
    "validate a folder": (["validate", "{dir}"], ": file: is a directory"),
    "validate a binary": (["validate", str(CORPUS / "binary.toml")], "binary.toml: file: is binary"),
}


@pytest.mark.parametrize("case", sorted(ARGS))
def test_bad_arguments(capsys, tmp_path, case):
    argv, piece = ARGS[case]
    (tmp_path / "sub.json").mkdir()
    out_file = tmp_path / "out.json"
    out_file.write_text(OLD)
    argv = [a.format(out=out_file, dir=tmp_path) for a in argv]
    code, out, err = cli(capsys, *argv)
    assert code == 2 and out == ""
    assert piece in one_error_line(err)
    assert out_file.read_text() == OLD  # nothing written, nothing altered
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "sub.json"]


def test_validate_reports_each_bad_file_on_its_own_line(capsys, tmp_path):
    good = tmp_path / "good.toml"
    good.write_text(GOOD)
    bad = [str(CORPUS / "ragged_x.toml"), str(CORPUS / "latin1.toml")]
    code, out, err = cli(capsys, "validate", bad[0], str(good), bad[1])
    assert code == 2 and out == f"{good}: ok\n"
    lines = err.splitlines()
    assert len(lines) == 2 and all(line.startswith(f"attnsim: error: {b}: ") for line, b in zip(lines, bad))


def test_a_file_name_with_a_newline_is_still_one_line(capsys, tmp_path):
    path = tmp_path / "bad\nname.toml"
    path.write_text("x = [[1, 2], [3]]\n")
    code, _, err = cli(capsys, "show", str(path))
    assert code == 2 and "bad\\nname.toml: x[1]: expected 2 numbers like row 0" in one_error_line(err)


@pytest.mark.parametrize("argv, line", [
    (["show", "by_hand", "--set", "mask=[[1,0],[1,1]]"], "--set mask: expected a 4 × 4 matrix (key × query), got 2 × 2"),
    (["quiz", "by_hand", "--step", "h0.weights", "--set", "mask=[[1]]"], "--set mask: expected a 4 × 4 matrix"),
    (["export", "kv_cache", "--set", "mask=none", "-o", "{dir}/t.json"], "--set mask: expected causal with [decode]"),
    (["show", "sinks", "--set", "normalize=relu"], "--set normalize: expected softmax with weights.sinks, got relu"),
    (["show", "by_hand", "--set", "mask=STREAMING:1:2"], "--set mask: expected none, causal, causal_lower_right, "),
])
def test_a_bad_set_value_is_blamed_on_the_option_not_the_scenario_file(capsys, tmp_path, argv, line):
    code, out, err = cli(capsys, *[a.format(dir=tmp_path) for a in argv])
    assert code == 2 and out == "" and not list(tmp_path.iterdir())
    assert one_error_line(err).startswith(line)   # the option first, the file at most as what it was set for


@pytest.mark.parametrize("argv", [
    ["show", "tests/bad_inputs/nan_in_x.toml"],
    ["export", "by_hand", "-o", "{dir}/none/t.npz"],
    ["show", "by_hand", "--set", "softmax_base=1"],
    ["show", "../../etc/passwd"],
    ["show", "tests/bad_inputs/qk_norm_eps_zero_row.toml"],
    ["show", "sinks", "--set", "normalize=relu"],
])
def test_the_installed_command_exits_2_without_a_traceback(tmp_path, argv):
    # a real process: what a shell user sees, warnings and all
    code = "import sys; from tui.cli import main; sys.exit(main(sys.argv[1:]))"
    argv = [a.format(dir=tmp_path) for a in argv]
    done = subprocess.run([sys.executable, "-c", code, *argv], cwd=Path(__file__).parent.parent,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONWARNINGS": "default"})
    assert done.returncode == 2 and done.stdout == ""
    one_error_line(done.stderr)
