"""Reading a file a user named, safely: it must be a regular file (a FIFO would hang the read, a
device such as /dev/zero would never end), no larger than a bound checked before reading, and read
with that bound even if it grows meanwhile; a JSON document in it read with its nesting and its
integers bounded. Every refusal is a ScenarioError naming the file."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from .errors import ScenarioError

CONFIG_BYTES = 2**20   # a checkpoint's config.json is kilobytes


def why(err: Exception) -> str:
    return getattr(err, "strerror", None) or str(err) or type(err).__name__


def regular(path: Path, field: str, expected: str, where: str | None = None) -> os.stat_result:
    """stat() of a regular file (following links); a missing, odd or unreadable one refused."""
    where = str(path) if where is None else where
    try:
        info = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        if os.path.lexists(path):
            raise ScenarioError(field, f"is a link to nothing; expected {expected}", where) from None
        raise ScenarioError(field, f"is missing; expected {expected}", where) from None
    except (OSError, ValueError) as err:
        raise ScenarioError(field, f"cannot be read ({why(err)}); expected {expected}", where) from None
    if stat.S_ISDIR(info.st_mode):
        raise ScenarioError(field, f"is a directory; expected {expected}", where)
    if not stat.S_ISREG(info.st_mode):
        raise ScenarioError(field, f"is not a regular file (a device, pipe or socket); expected {expected}", where)
    return info


def read_bounded(path: Path, limit: int, field: str, expected: str, where: str | None = None) -> bytes:
    """The bytes of regular file `path`, at most `limit` of them (a larger file is refused)."""
    where = str(path) if where is None else where
    info = regular(path, field, expected, where)
    too_big = f"is larger than {_size(limit)}; expected {expected}"
    if info.st_size > limit:
        raise ScenarioError(field, too_big, where)
    try:
        with open(path, "rb") as f:
            raw = f.read(limit + 1)
    except OSError as err:
        raise ScenarioError(field, f"cannot be read ({why(err)}); expected {expected}", where) from None
    if len(raw) > limit:
        raise ScenarioError(field, too_big, where)
    return raw


def read_json(path: Path, limit: int, field: str, expected: str, where: str | None = None, what: str = "JSON"):
    """The JSON document in regular file `path` (at most `limit` bytes, UTF-8)."""
    where = str(path) if where is None else where
    return parse_json(read_bounded(path, limit, field, expected, where), field, expected, where, what)


def checkpoint_json(path: Path, limit: int, expected: str):
    """A JSON file of a checkpoint (config.json, the shards' index), named by itself in its folder."""
    return read_json(path, limit, path.name, expected, str(path.parent))


def parse_json(raw: bytes | str, field: str, expected: str, where: str | None = None, what: str = "JSON"):
    """The JSON document in `raw`; one refusal for any text that is not one (`what`: what it was
    to be), including a document nested 100 000 deep (RecursionError) and an integer of thousands
    of digits (Python's limit)."""
    try:
        return json.loads(raw.decode("utf-8-sig") if isinstance(raw, bytes) else raw)
    except RecursionError:
        raise ScenarioError(field, f"is nested too deeply; expected {expected}", where) from None
    except UnicodeDecodeError:
        raise ScenarioError(field, f"is not UTF-8 text; expected {expected}", where) from None
    except json.JSONDecodeError as err:
        raise ScenarioError(field, f"is not {what} ({err.msg} at line {err.lineno}); expected {expected}",
                            where) from None
    except ValueError:   # the only other: an integer longer than int() reads (4300 digits)
        raise ScenarioError(field, f"holds a number of thousands of digits; expected {expected}", where) from None


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 2**20 else f"{n >> 10} KiB"
