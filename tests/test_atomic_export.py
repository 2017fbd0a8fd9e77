"""Nothing written before is lost: an export killed mid-write, or failing, leaves an existing file
untouched and no partial file; npz files are only ever loaded without pickle."""
import errno
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tracer
import tracer.export as export
from tracer.export import write_export

ROOT = Path(__file__).resolve().parent.parent
OLD = b"an older export that must survive\n" * 1000
# large enough that writing it takes a while: 8 heads of 1024 × 1024 scores, weights, powers...
BIG = "[random]\nseed = 1\ntokens = 1024\nd_model = 64\nheads = 8\nd_k = 16\n"


def temp_names(folder: Path, target: str) -> list[str]:
    """Files in folder that are neither the target nor the scenario: should be none, or temp files."""
    return sorted(p.name for p in folder.iterdir() if p.name not in (target, "big.toml"))


@pytest.fixture(scope="module")
def killed_export(tmp_path_factory):
    """Starts `attnsim export` of a large trace over an existing file and SIGKILLs it mid-write."""
    folder = tmp_path_factory.mktemp("killed")
    (folder / "big.toml").write_text(BIG)
    target = folder / "out.npz"
    target.write_bytes(OLD)
    code = "import sys; from tui.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", code, "export", "big.toml", "-o", "out.npz"], cwd=folder,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen, give_up = None, time.monotonic() + 300  # a bound on waiting, not a check on speed
    while proc.poll() is None and time.monotonic() < give_up:
        partial = [p for p in folder.iterdir() if p.name not in ("out.npz", "big.toml")]
        if partial and partial[0].stat().st_size > 0:  # the export is writing its temp file now
            os.kill(proc.pid, signal.SIGKILL)
            seen = partial[0].name
            break
        time.sleep(0.002)
    proc.wait()
    stderr = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    assert seen, f"the export ended (code {proc.returncode}) before it could be caught writing: {stderr}"
    assert proc.returncode == -signal.SIGKILL
    return folder, target, seen


def test_killed_export_leaves_the_old_file_untouched(killed_export):
    folder, target, seen = killed_export
    assert target.read_bytes() == OLD
    left = temp_names(folder, "out.npz")
    # what may stay behind is only a file whose name says it is a temp of this target
    assert all(re.fullmatch(r"\.out\.npz\..+\.partial", name) for name in left), left
    assert seen in left or not left


def test_the_next_export_cleans_up_after_a_killed_one(killed_export):
    folder, target, _ = killed_export
    write_export(tracer.run("by_hand"), target)
    with np.load(target, allow_pickle=False) as z:
        assert "h0.weights" in z.files
    assert temp_names(folder, "out.npz") == []


# ------------------------------------------------------------ failures inside the writer

@pytest.fixture
def old_file(tmp_path):
    target = tmp_path / "t.npz"
    target.write_bytes(OLD)
    target.chmod(0o640)
    return target


def failing_writer(exc):
    def write(trace, steps, tmp, blank):
        Path(tmp).write_bytes(b"half a zip file")  # some bytes are out before it fails
        raise exc
    return write


@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt(), MemoryError()])
def test_a_failing_export_leaves_the_old_file_and_no_temp(old_file, monkeypatch, exc):
    monkeypatch.setattr(export, "_write_npz", failing_writer(exc))
    with pytest.raises(type(exc)):
        write_export(tracer.run("by_hand"), old_file)
    assert old_file.read_bytes() == OLD
    assert [p.name for p in old_file.parent.iterdir()] == ["t.npz"]


def test_disk_full_is_a_scenario_error(old_file, monkeypatch):
    monkeypatch.setattr(export, "_write_npz", failing_writer(OSError(errno.ENOSPC, "No space left on device")))
    try:
        with pytest.raises(tracer.ScenarioError, match="No space left on device"):
            write_export(tracer.run("by_hand"), old_file)
    finally:
        assert old_file.read_bytes() == OLD
        assert [p.name for p in old_file.parent.iterdir()] == ["t.npz"]


@pytest.mark.parametrize("free", [0, 100])
def test_a_nearly_full_disk_is_said_in_bytes(capsys, old_file, monkeypatch, free):
    """The space check said "needs about 0.0 GiB, but … has 0.0 GiB free" for a small export."""
    from collections import namedtuple
    from tui.cli import main
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr("shutil.disk_usage", lambda folder: usage(2**40, 2**40 - free, free))
    capsys.readouterr()
    assert main(["export", "by_hand", "-o", str(old_file), "--format", "json", "--step", "h0.weights"]) == 2
    line = capsys.readouterr().err.splitlines()[-1]
    assert re.fullmatch(rf"attnsim: error: -o: not enough space in {re.escape(str(old_file.parent))}: the export "
                        rf"needs about \d+ bytes, {free} bytes free; expected fewer steps \(--step\) or a folder "
                        "with more room", line), line
    assert old_file.read_bytes() == OLD


def test_sizes_are_said_without_rounding_to_nothing():
    from tracer.writing import amount
    assert [amount(n) for n in (0, 1, 1536, 2**20 - 1, 3 * 2**20, 5 * 2**30 // 2)] == [
        "0 bytes", "1 byte", "1,536 bytes", "1,048,575 bytes", "3.0 MiB", "2.5 GiB"]


@pytest.mark.parametrize("argv", [["export", "by_hand", "-o", ""], ["export", "by_hand", "-o", "", "--format", "svg"]])
def test_an_empty_output_path_is_said_to_be_empty(capsys, argv):
    """-o '' was "is a folder" (the empty path is the current folder)."""
    from tui.cli import main
    capsys.readouterr()
    assert main(argv) == 2
    assert capsys.readouterr().err == "attnsim: error: -o: is empty; expected a file path, e.g. trace.json\n"
    with pytest.raises(tracer.ScenarioError, match="^-o: is empty"):
        export.atomic_path("").__enter__()


def test_a_successful_export_replaces_the_file_and_keeps_its_mode(old_file):
    write_export(tracer.run("by_hand"), old_file)
    with np.load(old_file, allow_pickle=False) as z:
        assert z["h0.weights"].shape == (4, 4)
    assert old_file.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in old_file.parent.iterdir()] == ["t.npz"]


# ------------------------------------------------------------ targets that cannot be written

def test_a_directory_target_is_refused(tmp_path):
    (tmp_path / "d.json").mkdir()
    with pytest.raises(tracer.ScenarioError, match="is a folder"):
        write_export(tracer.run("by_hand"), tmp_path / "d.json")
    assert (tmp_path / "d.json").is_dir() and not any((tmp_path / "d.json").iterdir())


@pytest.mark.parametrize("where", ["missing/out.json", "file.txt/out.json"])
def test_a_missing_folder_is_refused(tmp_path, where):
    (tmp_path / "file.txt").write_text("a file, not a folder")
    with pytest.raises(tracer.ScenarioError, match="^-o: "):
        write_export(tracer.run("by_hand"), tmp_path / where)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write anywhere")
def test_a_read_only_folder_is_refused(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / "t.json").write_bytes(OLD)
    folder.chmod(0o500)
    try:
        with pytest.raises(tracer.ScenarioError, match="^-o: cannot write in"):
            write_export(tracer.run("by_hand"), folder / "t.json")
        assert (folder / "t.json").read_bytes() == OLD
    finally:
        folder.chmod(0o700)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_export_refuses_a_fifo_target(tmp_path):
    fifo = tmp_path / "t.json"
    os.mkfifo(fifo)
    try:
        with pytest.raises(tracer.ScenarioError, match="not a regular file"):
            write_export(tracer.run("by_hand"), fifo)
    finally:
        assert fifo.is_fifo()


# ------------------------------------------------------------ data only: no pickle, no evaluation

def python_files():
    for folder in ("tracer", "tui", "tests", "bench"):
        yield from (ROOT / folder).rglob("*.py")


def test_every_np_load_refuses_pickles():
    calls = []
    for path in python_files():
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"\b(?:np|numpy)\.load\(", text):
            depth, end = 1, match.end()
            while depth and end < len(text):  # the call's arguments, up to its closing parenthesis
                depth += {"(": 1, ")": -1}.get(text[end], 0)
                end += 1
            calls.append((path.name, text[match.end():end - 1]))
    assert calls, "expected at least the tests' own np.load calls"
    assert [c for c in calls if "allow_pickle=False" not in c[1]] == []


def test_the_tracer_never_evaluates_or_unpickles():
    for path in (ROOT / "tracer").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\b(eval|exec)\(|\bpickle\b|allow_pickle=True|yaml\.load\(", text), path.name
