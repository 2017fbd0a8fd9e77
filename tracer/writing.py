"""What every writer of a trace file shares: the steps asked for (unknown ids refused), the
atomic write (a temporary file beside the target, renamed over it only when complete), and text
cells a spreadsheet shows as text (never runs as a formula)."""
from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import tempfile
from pathlib import Path

from .errors import ScenarioError


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")   # what makes a spreadsheet read a cell as a formula


def spreadsheet_text(text: str) -> str:
    """A text cell of a CSV meant for a spreadsheet, disarmed by OWASP's rule for CSV injection: one
    that starts with = + - @, a tab or a carriage return gets a leading ' (shown as text, never run).
    For text only: a number such as -0.5 is written as it is."""
    return "'" + text if text.startswith(FORMULA_START) else text


def selected_steps(trace, steps=None) -> list:
    """The Step objects asked for (all when None), in computation order; unknown ids refused."""
    if steps is None:
        return list(trace.steps)
    known = {s.id for s in trace.steps}
    for sid in steps:
        if sid not in known:
            raise ScenarioError("--step", f"unknown step {sid!r}; expected one of {', '.join(s.id for s in trace.steps)}")
    wanted = set(steps)
    return [s for s in trace.steps if s.id in wanted]


def refuse_an_input(path, scenario) -> None:
    """An export never replaces what its own run read: the scenario file, the array files it
    names, or anything in the checkpoint folder of a model's layer (hard links and symbolic
    links to them included)."""
    target = Path(path)
    for given in (scenario.source, *scenario.files):
        if given and _same(target, Path(given)):
            raise ScenarioError("-o", f"{target} is an input of this run ({given}); expected another path, "
                                "so that the input is kept")
    folder = (scenario.model or {}).get("path")
    if folder and _inside(target, Path(folder)):
        raise ScenarioError("-o", f"{target} is inside the checkpoint folder {folder}, an input of this run; "
                            "expected a path outside it")
    for entry in _entries(folder):   # the Hugging Face cache: each file a link into blobs/, outside the folder
        if _same(target, entry):
            raise ScenarioError("-o", f"{target} is {entry} (a link of the checkpoint folder to it), an input of "
                                "this run; expected another path, so that the input is kept")


def _same(a: Path, b: Path) -> bool:
    with contextlib.suppress(OSError):
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def _entries(folder) -> list[Path]:
    if not folder:
        return []
    with contextlib.suppress(OSError):
        with os.scandir(folder) as found:
            return [Path(e.path) for e in found]
    return []


def _inside(target: Path, folder: Path) -> bool:
    real, top = Path(os.path.realpath(target)), Path(os.path.realpath(folder))
    return top == real or top in real.parents


def room(folder: Path, need: int, what: str) -> None:
    """Refuses to start writing `need` bytes (an estimate) where the disk has fewer free, saying
    both in bytes, so that a nearly full disk never reads "0.0 GiB needed, 0.0 GiB free"."""
    with contextlib.suppress(OSError):
        free = shutil.disk_usage(folder).free
        if need > free:
            raise ScenarioError("-o", f"not enough space in {folder}: {what} needs about {amount(need)}, "
                                f"{amount(free)} free; expected fewer steps (--step) or a folder with more room")


def amount(nbytes: int) -> str:
    """A size in words that never rounds to nothing: 512 bytes, 1,536 bytes, 3.2 MiB, 1.5 GiB."""
    if nbytes < 2**20:
        return f"{nbytes:,} byte{'s' if nbytes != 1 else ''}"
    return f"{nbytes / 2**20:.1f} MiB" if nbytes < 2**30 else f"{nbytes / 2**30:.1f} GiB"


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yields a temporary path beside `path`; renames it over `path` only if the block succeeds.

    The temporary name carries the writer's pid, so that the leftovers of a killed export are
    recognised and removed by the next export to the same target, never a live one's."""
    if not os.fspath(path):   # Path("") is the current folder
        raise ScenarioError("-o", "is empty; expected a file path, e.g. trace.json")
    target = Path(path)
    try:   # a name too long, or a folder we may not enter, is an OSError here: one line, not a traceback
        folder = _check_target(target)
        _remove_stale(folder, target.name)
    except OSError as err:
        raise ScenarioError("-o", f"cannot use {target} ({err.strerror or err}); expected a path this user can "
                            "write, with a name the file system allows") from None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{_stem(target.name)}.{os.getpid()}.",
                                    suffix=".partial")
    except OSError as err:
        raise ScenarioError("-o", f"cannot write in {folder} ({err.strerror}); expected a writable folder") from None
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        if target.exists():  # keep the old file's permissions
            shutil.copymode(target, tmp)
        else:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(err, OSError):
            raise ScenarioError("-o", f"cannot write {target} ({err.strerror or err}); "
                                "expected a writable path with free space") from None
        raise


def _check_target(target: Path) -> Path:
    """The folder to write in, once the target is known to be a file we may replace there."""
    if target.is_dir():
        raise ScenarioError("-o", f"{target} is a directory; expected a file path")
    if target.exists() and not target.is_file():
        raise ScenarioError("-o", f"{target} is not a regular file (a device or pipe); expected a file path")
    if target.exists() and not (target.stat().st_mode & 0o222 and os.access(target, os.W_OK)):
        # refused like a read-only folder, even for root, whom os.access lets write anything
        raise ScenarioError("-o", f"{target} is read-only; expected a writable file (chmod u+w) or another path")
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        state = "is not a folder" if folder.exists() else "does not exist"
        raise ScenarioError("-o", f"the folder {folder} {state}; expected an existing folder")
    return folder


def _remove_stale(folder: Path, name: str) -> None:
    """Deletes temporary files of earlier exports to `name` whose process no longer runs; only
    names exactly as atomic_path makes them (another target's `name.123` is not `name`'s pid 123)."""
    ours = re.compile(rf"\.{re.escape(_stem(name))}\.(\d+)\.[a-z0-9_]{{8}}\.partial")
    for leftover in folder.glob(f".{glob.escape(_stem(name))}.*.partial"):
        match = ours.fullmatch(leftover.name)
        if not match:
            continue
        pid = match.group(1)
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                leftover.unlink()
        except OSError:
            pass  # alive, or not ours to ask about


def _stem(name: str) -> str:
    """The target's name as its temporary files carry it: cut, so that a name the file system
    allows (up to 255 bytes) still leaves room for the pid and the random part."""
    return name.encode("utf-8", "surrogateescape")[:200].decode("utf-8", "ignore")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
