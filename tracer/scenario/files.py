"""Finding and reading scenario files: built-in names (which never leave the scenarios folder)
and paths, read as bounded UTF-8 TOML; every failure is a ScenarioError naming the file."""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from ..checks import kind, suggest
from ..errors import ScenarioError
from ..tomlfile import parse_toml

MAX_FILE_BYTES = 64 * 2**20
BUILTIN_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")


def scenarios_dir() -> Path:
    """The built-in scenarios: shipped inside the package, or beside it in a source checkout."""
    package = Path(__file__).resolve().parent.parent   # tracer/
    inside = package / "scenarios"
    try:
        return inside if inside.is_dir() else package.parent / "scenarios"
    except OSError as err:   # an install this user may not read
        raise _unreadable(inside, err) from None


def builtin_names() -> list[str]:
    folder = scenarios_dir()
    try:   # listed, not globbed: a glob would take a folder it may not read for an empty one
        files = os.listdir(folder)
    except FileNotFoundError:
        return []
    except OSError as err:
        raise _unreadable(folder, err) from None
    return sorted(f[:-5] for f in files if f.endswith(".toml") and BUILTIN_NAME.match(f[:-5]))


def _names_or_none() -> list[str]:
    try:
        return builtin_names()
    except ScenarioError:
        return []


def _unreadable(folder: Path, err: OSError) -> ScenarioError:
    return ScenarioError("built-in scenarios", f"cannot be read ({_why(err)}); expected the installed "
                         "package's files to be readable by this user (or give a .toml path)", str(folder))


def list_builtins() -> list[tuple[str, str]]:
    """(name, one-line description) for every built-in, without building any of them."""
    out = []
    for name in builtin_names():
        data = read_toml(scenarios_dir() / f"{name}.toml")
        about = data.get("title") or data.get("description") or ""
        about = about.strip() if isinstance(about, str) else ""
        out.append((name, about.splitlines()[0] if about else ""))
    return out


EXTRAS = {"models": ("safetensors", "tokenizers")}   # an extra's packages, as pyproject.toml names them


def builtin_extras(name: str) -> list[str]:
    """The extras a built-in needs beyond the core packages: `models` for a checkpoint's layer."""
    data = read_toml(scenarios_dir() / f"{name}.toml")
    return ["models"] if isinstance(data, dict) and "model" in data else []


def installed(extra: str) -> bool:
    import importlib.util
    return all(importlib.util.find_spec(package) is not None for package in EXTRAS[extra])


def resolve_path(spec) -> Path:
    """A built-in scenario's file (names win), or a path as given; a name never leaves the
    scenarios folder, since only the names listed there are ever joined to it."""
    try:
        text = os.fsdecode(os.fspath(spec))
    except TypeError:
        raise ScenarioError("scenario", f"expected a built-in name or a path to a .toml file, got {kind(spec)}") from None
    if "\x00" in text or not text.strip():
        raise ScenarioError("scenario", f"expected a built-in name or a path to a .toml file, got {kind(text)}")
    looks_like_a_path = text.endswith(".toml") or "/" in text or os.sep in text or (os.altsep and os.altsep in text)
    try:
        names = builtin_names()
    except ScenarioError:
        if looks_like_a_path:   # a file of the user's own needs no built-in
            return Path(text)
        raise
    if text in names:
        return scenarios_dir() / f"{text}.toml"
    if looks_like_a_path or os.path.lexists(text):
        return Path(text)
    raise ScenarioError("scenario", f"{text!r} is neither a .toml file nor a built-in scenario"
                        f"{suggest(text, names)}; expected one of {', '.join(names)} or a path")


def read_toml(path: Path) -> dict:
    """The TOML document of a regular, UTF-8 file of at most MAX_FILE_BYTES."""
    where = str(path)
    try:
        info = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        hint = ""
        if path.suffix == ".toml" and path.parent == Path(".") and path.stem in _names_or_none():
            hint = f" (the built-in scenario is named {path.stem!r}, without .toml)"
        raise ScenarioError("file", f"does not exist{hint}; expected a .toml scenario file", where) from None
    except (OSError, ValueError) as err:
        raise ScenarioError("file", f"cannot be read ({_why(err)}); expected a readable .toml file", where) from None
    if stat.S_ISDIR(info.st_mode):
        raise ScenarioError("file", "is a directory; expected a .toml scenario file", where)
    if not stat.S_ISREG(info.st_mode):
        raise ScenarioError("file", "is not a regular file (a device, pipe or socket); expected a .toml file", where)
    if info.st_size > MAX_FILE_BYTES:
        raise ScenarioError("file", f"is larger than {MAX_FILE_BYTES >> 20} MiB; expected a smaller file "
                            "(use a [random] section for large scenarios)", where)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)  # bounded, even if the file grows meanwhile
    except OSError as err:
        raise ScenarioError("file", f"cannot be read ({_why(err)}); expected a readable .toml file", where) from None
    if len(raw) > MAX_FILE_BYTES:
        raise ScenarioError("file", f"is larger than {MAX_FILE_BYTES >> 20} MiB; expected a smaller file", where)
    if b"\x00" in raw:
        raise ScenarioError("file", f"is binary (a NUL byte at offset {raw.index(0)}); expected a .toml text file", where)
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark, as some editors write, is fine
    except UnicodeDecodeError as err:
        raise ScenarioError("file", f"is not UTF-8 text (byte 0x{raw[err.start]:02x} at offset {err.start}); "
                            "expected a UTF-8 .toml file", where) from None
    return parse_toml(text, where)


def _why(err: Exception) -> str:
    return getattr(err, "strerror", None) or str(err) or type(err).__name__
