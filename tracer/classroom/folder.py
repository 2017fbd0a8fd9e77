"""A class folder written whole or not at all: built in a hidden sibling, renamed into place at
the end; an earlier class there is replaced only when asked (--force), and only a class."""
from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from ..errors import ScenarioError

SCHEMA = "attnsim.class/1"
KEY = "key.json"


def is_class(folder: Path) -> bool:
    """Whether the folder holds a class that `attnsim class make` wrote (its key.json says so)."""
    try:
        with open(folder / KEY, encoding="utf-8") as f:
            return json.load(f).get("schema") == SCHEMA
    except (OSError, ValueError, AttributeError):
        return False


def check_target(folder: Path, force: bool) -> None:
    """Refuses a FOLDER that cannot take a class: a file, a missing parent, or one that holds
    something already (unless --force and it is an earlier class)."""
    parent = folder.parent if str(folder.parent) else Path(".")
    try:
        if folder.exists() and not folder.is_dir():
            raise ScenarioError("-o", f"{folder} is a file; expected a folder for the class (new or empty)")
        if not parent.is_dir():
            raise ScenarioError("-o", f"the folder {parent} does not exist; expected the class's folder in an "
                                "existing one")
        if folder.is_dir() and any(folder.iterdir()):
            if not force:
                raise ScenarioError("-o", f"{folder} exists and is not empty; expected a new or empty folder "
                                    "(or --force to replace a class made there before)")
            if not is_class(folder):
                raise ScenarioError("--force", f"{folder} holds files but no class ({KEY}); expected a folder made "
                                    "by attnsim class make: --force replaces a class, nothing else")
    except OSError as err:
        raise ScenarioError("-o", f"cannot use {folder} ({err.strerror or err}); expected a folder this user can "
                            "write") from None


@contextlib.contextmanager
def built_in_place(folder: Path):
    """Yields an empty hidden folder beside FOLDER; when the block ends well it becomes FOLDER
    (an earlier one is moved aside, then removed); when it fails, it is removed."""
    parent = folder.parent if str(folder.parent) else Path(".")
    _remove_stale(parent, folder.name)
    stem = f".{folder.name[:120]}.{os.getpid()}."
    try:
        tmp = Path(tempfile.mkdtemp(dir=parent, prefix=stem, suffix=".partial"))
    except OSError as err:
        raise ScenarioError("-o", f"cannot write in {parent} ({err.strerror}); expected a writable folder") from None
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())
        if folder.exists():
            old = Path(tempfile.mkdtemp(dir=parent, prefix=stem, suffix=".partial"))
            os.replace(folder, old)
            os.replace(tmp, folder)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, folder)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(err, OSError):
            raise ScenarioError("-o", f"cannot write {folder} ({err.strerror or err}); expected a writable "
                                "folder with free space") from None
        raise


def _remove_stale(parent: Path, name: str) -> None:
    """Removes the hidden folders of earlier makes of `name` whose process no longer runs."""
    ours = re.compile(rf"\.{re.escape(name[:120])}\.(\d+)\.[a-z0-9_]{{8}}\.partial")
    for leftover in parent.glob(f".{glob.escape(name[:120])}.*.partial"):
        match = ours.fullmatch(leftover.name)
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
