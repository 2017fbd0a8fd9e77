"""Export targets that are hostile or odd: names too long, folders we may not enter, read-only
files, other exports' live temporary files, and labels that would break a Markdown table."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tracer
from tracer.export import write_export
from tui.cli import main

ROOT = Path(__file__).parent.parent


def one_error(capsys) -> str:
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("attnsim: error: ")]
    assert len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


@pytest.mark.parametrize("length", [256, 300, 5000])
def test_a_name_longer_than_the_file_system_allows(tmp_path, capsys, length):
    target = tmp_path / ("a" * length + ".json")
    assert main(["export", "by_hand", "-o", str(target)]) == 2
    assert "-o: cannot " in one_error(capsys)
    assert list(tmp_path.iterdir()) == []


def test_a_long_name_the_file_system_allows_is_written(tmp_path):
    target = tmp_path / ("b" * 245 + ".json")
    write_export(tracer.run("by_hand"), target)
    assert target.exists() and len(list(tmp_path.iterdir())) == 1


@pytest.mark.parametrize("mode", [0o444, 0o400, 0o555])
def test_a_read_only_target_is_refused_and_left_alone(tmp_path, capsys, mode):
    target = tmp_path / "old.json"
    target.write_text("an export written before\n")
    target.chmod(mode)
    assert main(["export", "by_hand", "-o", str(target)]) == 2
    assert "is read-only" in one_error(capsys)
    assert target.read_text() == "an export written before\n" and target.stat().st_mode & 0o777 == mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.json"]


def test_another_exports_live_temporary_file_is_kept(tmp_path):
    """Target t.json; another export writes t.json.99999999 (a name ending in digits) right now."""
    live = tmp_path / f".t.json.99999999.{os.getpid()}.abcdefgh.partial"
    live.write_text("being written")
    dead = tmp_path / ".t.json.99999999.abcdefgh.partial"     # t.json's own, by a process gone
    dead.write_text("left by a killed export")
    write_export(tracer.run("by_hand"), tmp_path / "t.json")
    assert live.exists() and not dead.exists()


@pytest.mark.parametrize("token", ["a|b", "|", "x||y", "\\|", "a | b |"])
def test_a_pipe_in_a_token_keeps_the_markdown_table_whole(tmp_path, token):
    scenario = tracer.from_arrays(x=[[1.0, 0.0], [0.0, 1.0]], q=[[1.0], [0.0]], k=[[1.0], [1.0]],
                                  v=[[1.0], [2.0]], tokens=[token, "b"], features=[token, "f"])
    target = tmp_path / "sheet.md"
    write_export(tracer.run(scenario), target)
    for table in _tables(target.read_text(encoding="utf-8")):
        cells = [_cells(line) for line in table]
        assert len({len(row) for row in cells}) == 1, table


def _tables(text: str) -> list[list[str]]:
    tables, current = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables


def _cells(line: str) -> list[str]:
    """A GFM row's cells as cmark-gfm splits them: on each | not right after a backslash."""
    out, cell, escaped = [], "", False
    for ch in line.strip()[1:-1]:
        if ch == "|" and not escaped:
            out.append(cell)
            cell = ""
        else:
            cell += ch
        escaped = ch == "\\"
    return out + [cell]


DROPPED = """
import os, sys
from tui.cli import main   # everything imported and run once first: nobody cannot read root's Python
import tracer, tracer.export, tracer.writing, tracer.kernels.warm
main(["export", "by_hand", "-o", os.devnull + ".never/t.json"])
os.setgid(65534); os.setuid(65534)   # nobody: permissions apply again
sys.exit(main(sys.argv[1:]))
"""
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _others_may_read(path: Path) -> bool:
    """Whether a user with no rights of its own may reach `path` (every folder above it enterable)."""
    path = path.resolve()
    return all(p.stat().st_mode & 0o001 for p in path.parents) and bool(path.stat().st_mode & 0o004)


@pytest.fixture
def shared_copy():
    """A folder nobody may use, holding a copy of the package it may read: the checkout itself may
    sit in a folder other users cannot enter (a home folder of mode 700). Python and its packages
    are imported as root before the drop (DROPPED), so they may sit anywhere."""
    shared = Path(os.environ.get("TMPDIR", "/tmp")) / f"attnsim-perm-{os.getpid()}"
    shared.mkdir(mode=0o777)
    try:
        shared.chmod(0o777)
        if not _others_may_read(shared):
            pytest.skip(f"another user cannot enter {shared.parent}")
        copy = shared / "checkout"
        for part in ("tracer", "tui", "scenarios"):
            shutil.copytree(ROOT / part, copy / part, ignore=shutil.ignore_patterns("__pycache__"))
        for folder, _, files in os.walk(copy):
            os.chmod(folder, 0o755)
            for name in files:
                os.chmod(os.path.join(folder, name), 0o644)
        yield shared, copy
    finally:
        subprocess.run(["rm", "-rf", str(shared)], check=False)


def as_nobody(shared: Path, copy: Path, *argv: str) -> subprocess.CompletedProcess:
    """attnsim run from the copy, dropped to nobody after its imports (as root), or as this user."""
    code = DROPPED if AS_ROOT else "import sys\nfrom tui.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *argv], cwd=copy, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HOME": str(shared), "NUMBA_CACHE_DIR": str(shared / "numba"),
                               "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"})


@pytest.mark.skipif(not AS_ROOT, reason="needs root to drop to nobody; "
                    "as an ordinary user the shut folder is tested directly below")
def test_a_parent_folder_without_execute_permission_as_nobody(shared_copy):
    """As root, permissions do not apply: the export runs as nobody, in a folder it may list but
    not enter (mode 0o666 has no x), under a shared folder it may reach."""
    shared, copy = shared_copy
    shut = shared / "shut"
    shut.mkdir()
    shut.chmod(0o666)
    done = as_nobody(shared, copy, "export", "by_hand", "-o", str(shut / "t.json"))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("attnsim: error: -o: cannot ")


def test_built_in_scenarios_this_user_may_not_read(shared_copy, tmp_path):
    """An install whose scenarios folder the user may not read: one line for a built-in, and a
    scenario file of the user's own still runs."""
    shared, copy = shared_copy
    (copy / "scenarios").chmod(0o700 if AS_ROOT else 0o000)
    mine = shared / "mine.toml"
    mine.write_text((ROOT / "scenarios" / "toy_dk4.toml").read_text(encoding="utf-8"), encoding="utf-8")
    mine.chmod(0o644)
    try:
        for argv in (["show", "by_hand"], ["list"]):
            done = as_nobody(shared, copy, *argv)
            assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
            last = done.stderr.strip().splitlines()[-1]
            assert last.startswith("attnsim: error: ") and "built-in scenarios: cannot be read" in last, last
        done = as_nobody(shared, copy, "show", str(mine), "--step", "h0.weights")
        assert done.returncode == 0 and "h0.weights" in done.stdout, done.stderr
    finally:
        (copy / "scenarios").chmod(0o755)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root enters any folder (tested as nobody)")
def test_a_parent_folder_without_execute_permission(tmp_path, capsys):
    shut = tmp_path / "shut"
    shut.mkdir()
    shut.chmod(0o666)
    try:
        assert main(["export", "by_hand", "-o", str(shut / "t.json")]) == 2
        assert "-o: cannot " in one_error(capsys)
    finally:
        shut.chmod(0o755)
