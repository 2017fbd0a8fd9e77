"""A class folder written whole or not at all, and never at the cost of anything else. A new FOLDER
is built in a hidden sibling and renamed into place; the rename fails if a folder with anything in
it appeared meanwhile (another make won: this one says so, and removes only its own). An existing
FOLDER (empty, or with --force an earlier class) is built in a hidden folder inside it, whose files
are moved in under a lock once complete: --force moves out only the earlier class's own files (the
names its key.json's students give), and a name the class needs that holds anything else is
refused, naming it. Whatever else is there (returned answers, grades.csv) stays."""
from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import tempfile
from pathlib import Path

from ..errors import ScenarioError
from ..readfile import read_json

SCHEMA = "attnsim.class/1"
KEY = "key.json"
ID = re.compile(r"s\d{2,3}")                 # the ids class make gives: s01 … s99, s001 … s500
SHEETS = (".pdf", ".md", ".toml", ".csv")    # a student's files
INSIDE = "attnsim-class"                     # the hidden build folder's name inside an existing FOLDER
KEY_BYTES = 16 * 2**20


def class_files(ids) -> list[str]:
    """The names a class of these students consists of."""
    return [f"{sid}{ext}" for sid in ids for ext in SHEETS] + [KEY, "key.pdf"]


def earlier_class(folder: Path) -> set[str] | None:
    """The files of the class made in FOLDER before: the names its key.json's students give, that are
    files (a folder by such a name is not one); None when FOLDER holds no class."""
    try:
        key = read_json(folder / KEY, KEY_BYTES, KEY, "a class's key")
    except ScenarioError:
        return None
    if not isinstance(key, dict) or key.get("schema") != SCHEMA or not isinstance(key.get("students"), list):
        return None
    ids = [s["id"] for s in key["students"] if isinstance(s, dict) and isinstance(s.get("id"), str)
           and ID.fullmatch(s["id"])]
    return {name for name in class_files(ids) if (folder / name).is_file() or (folder / name).is_symlink()}


def check_target(folder: Path, force: bool, names) -> None:
    """Refuses a FOLDER that cannot take a class of these file names: a file, a missing parent, one
    that holds something already (unless --force and it is an earlier class), or one where a name
    the class needs holds anything but a file of the earlier class."""
    parent = folder.parent if str(folder.parent) else Path(".")
    try:
        if folder.exists() and not folder.is_dir():
            raise ScenarioError("-o", f"{folder} is a file; expected a folder for the class (new or empty)")
        if not parent.is_dir():
            raise ScenarioError("-o", f"the folder {parent} does not exist; expected the class's folder in an "
                                "existing one")
        if folder.is_dir():
            _may_take(folder, force, names)
    except OSError as err:
        raise ScenarioError("-o", f"cannot use {folder} ({err.strerror or err}); expected a folder this user can "
                            "write") from None


def _may_take(folder: Path, force: bool, names, appeared: bool = False) -> None:
    """What check_target says of an existing FOLDER; `appeared`: said again under the lock, once
    the class is built, of what changed meanwhile."""
    present = {n for n in os.listdir(folder) if not _ours(n, INSIDE)}
    if not present:
        return
    if not force:
        raise ScenarioError("-o", f"{folder} " + ("was written to while this class was made (another class make?); "
                            "nothing was written: expected" if appeared else "exists and is not empty; expected") +
                            " a new or empty folder (or --force to replace a class made there before)")
    earlier = earlier_class(folder)
    if earlier is None:
        raise ScenarioError("--force", f"{folder} holds files but no class ({KEY}); expected a folder made by "
                            "attnsim class make: --force replaces a class, nothing else")
    taken = sorted(set(names) & present - earlier)
    if taken:
        raise ScenarioError("--force", f"{folder / taken[0]} is not a file of the class made there before; expected "
                            "only the earlier class's files where the new one writes its own (move it away first)")


@contextlib.contextmanager
def built_in_place(folder: Path, force: bool, names):
    """Yields an empty hidden folder to write the class's files `names` in; when the block ends
    well they become FOLDER's (see the module's docstring); whatever happens, nothing of this
    make is left behind but the class."""
    real = Path(os.path.abspath(folder))   # `-o .` has a parent and a name too (messages keep what was typed)
    into = real.is_dir()
    home, stem = (real, INSIDE) if into else (real.parent, real.name[:120])
    _remove_stale(home, stem)
    try:
        tmp = Path(tempfile.mkdtemp(dir=home, prefix=f".{stem}.{os.getpid()}.", suffix=".partial"))
    except OSError as err:
        raise ScenarioError("-o", f"cannot write in {home} ({err.strerror}); expected a writable folder") from None
    try:
        yield tmp
        if into:
            _move_in(tmp, folder, force, names)
        else:
            _rename_new(tmp, folder)
    except OSError as err:
        raise ScenarioError("-o", f"cannot write {folder} ({err.strerror or err}); expected a writable folder with "
                            "free space") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _rename_new(tmp: Path, folder: Path) -> None:
    """The built folder renamed to FOLDER, at once; a FOLDER that appeared meanwhile with anything
    in it makes the rename fail (the kernel checks, not us: no moment between look and leap)."""
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        os.rename(tmp, folder)
    except OSError as err:
        if not os.path.lexists(folder):
            raise
        raise ScenarioError("-o", f"{folder} appeared while this class was made (another class make?); nothing was "
                            "written: expected a new folder, or --force to replace the class there") from None


def _move_in(tmp: Path, folder: Path, force: bool, names) -> None:
    """The built files moved into the existing FOLDER under a lock, after the earlier class's own
    files are moved aside (put back if anything fails, removed when all is in place)."""
    with _locked(folder):
        _may_take(folder, force, names, appeared=True)
        earlier = sorted(earlier_class(folder) or ()) if force else []
        aside = Path(tempfile.mkdtemp(dir=folder, prefix=f".{INSIDE}.{os.getpid()}.", suffix=".partial"))
        moved, placed = [], []
        try:
            for name in earlier:
                os.rename(folder / name, aside / name)
                moved.append(name)
            for name in sorted(os.listdir(tmp)):
                os.rename(tmp / name, folder / name)
                placed.append(name)
        except BaseException:
            for name in placed:
                with contextlib.suppress(OSError):
                    os.unlink(folder / name)
            for name in moved:
                with contextlib.suppress(OSError):
                    os.rename(aside / name, folder / name)
            raise
        finally:
            shutil.rmtree(aside, ignore_errors=True)


@contextlib.contextmanager
def _locked(folder: Path):
    """An exclusive lock on FOLDER (flock: released by the kernel when this process ends however
    it ends), so that two makes into one folder move their files in one after the other."""
    try:
        import fcntl
    except ImportError:   # no flock here: the checks under it still run
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _ours(name: str, stem: str) -> re.Match | None:
    return re.fullmatch(rf"\.{re.escape(stem)}\.(\d+)\.[a-z0-9_]{{8}}\.partial", name)


def _remove_stale(home: Path, stem: str) -> None:
    """Removes the hidden folders of earlier makes whose process no longer runs."""
    for leftover in home.glob(f".{glob.escape(stem)}.*.partial"):
        match = _ours(leftover.name, stem)
        if match and leftover.is_dir() and not _alive(int(match.group(1))):
            shutil.rmtree(leftover, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True   # alive, or not ours to ask about
    return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
