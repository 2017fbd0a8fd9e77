"""Matrices given as files: `x = "inputs.npy"` (or a `.csv`) beside the scenario file, for x, the
context and each weight, so that a published example's full-precision arrays need no pasting.
A file is read bounded and without pickles; its numbers then pass the same checks as typed ones."""
from __future__ import annotations

import csv
import stat
from pathlib import Path

import numpy as np

from ..checks import kind
from ..errors import ScenarioError, one_line

SUFFIXES = (".npy", ".csv")
MAX_ARRAY_BYTES = 1 << 30   # a GPT-3 layer's largest weight (12288² float32) is 0.6 GiB
WEIGHTS = ("q", "k", "v", "v_down", "v_up", "o", "bq", "bk", "bv", "bo")


def with_arrays(data: dict, base: Path, files: list | None = None) -> dict:
    """The scenario's fields with each path to an array file replaced by the array it holds
    (a list of paths: one file per head); each file read is appended to `files` when given."""
    def read(text: str, field: str):
        if files is not None:
            files.append(str(base / text))
        return read_array(text, field, base)
    out = dict(data)
    for key in ("x", "context"):
        if isinstance(out.get(key), str):
            out[key] = read(out[key], key)
    weights = out.get("weights")
    if isinstance(weights, dict):
        weights = dict(weights)
        for key in WEIGHTS:
            value = weights.get(key)
            if isinstance(value, str) and not (key == "v" and value == "k"):   # v = "k": the keys, not a file
                weights[key] = read(value, f"weights.{key}")
            elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                weights[key] = [read(v, f"weights.{key}[{h}]") for h, v in enumerate(value)]
        out["weights"] = weights
    return out


def read_array(text: str, field: str, base: Path) -> np.ndarray | list:
    """The array in the .npy or .csv file `text` names (relative to `base`, the scenario's folder)."""
    if Path(text).suffix.lower() not in SUFFIXES:
        raise ScenarioError(field, f"expected a matrix, or a path to a .npy or .csv file beside the scenario, "
                            f"got {kind(text)}")
    path = base / text
    where = f"{one_line(text, 200)!r}"
    try:
        info = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise ScenarioError(field, f"{where} does not exist beside the scenario (in {one_line(str(base), 200)}); "
                            "expected a .npy or .csv file there") from None
    except (OSError, ValueError) as err:
        raise ScenarioError(field, f"{where} cannot be read ({_why(err)}); expected a readable .npy or .csv file") from None
    if not stat.S_ISREG(info.st_mode):
        raise ScenarioError(field, f"{where} is not a regular file; expected a .npy or .csv file")
    if info.st_size > MAX_ARRAY_BYTES:
        raise ScenarioError(field, f"{where} is larger than {MAX_ARRAY_BYTES >> 30} GiB; expected a smaller array "
                            "(use a [random] section for large scenarios)")
    try:
        with open(path, "rb") as f:
            return _npy(f, where, field) if path.suffix.lower() == ".npy" else _csv(f, where, field)
    except OSError as err:
        raise ScenarioError(field, f"{where} cannot be read ({_why(err)}); expected a readable .npy or .csv file") from None


def _npy(f, where: str, field: str) -> np.ndarray:
    """A numeric .npy array of 1 to 3 dimensions, its header checked before its data is read."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        shape, _, dtype = (fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0)(f)
    except (ValueError, EOFError, OSError) as err:
        raise ScenarioError(field, f"{where} is not a .npy file ({_why(err)}); expected one written by numpy.save") from None
    if dtype.hasobject or dtype.kind not in "iuf":
        raise ScenarioError(field, f"{where} holds {dtype} values; expected numbers (int or float)")
    if not 1 <= len(shape) <= 3:
        raise ScenarioError(field, f"{where} has shape {shape}; expected a matrix (2-D, or 3-D: one per head)")
    f.seek(0)
    try:
        a = np.load(f, allow_pickle=False)
    except (ValueError, EOFError, OSError) as err:
        raise ScenarioError(field, f"{where} cannot be read as .npy ({_why(err)}); expected a whole numpy.save file") from None
    return np.atleast_2d(a) if a.ndim == 1 else a


def _csv(f, where: str, field: str) -> list:
    """Rows of numbers, comma-separated, one row a line (no header); blank lines are skipped."""
    try:
        text = f.read().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ScenarioError(field, f"{where} is not UTF-8 text (byte at offset {err.start}); expected a .csv of numbers") from None
    rows = []
    for line, cells in enumerate(csv.reader(text.splitlines()), start=1):
        if not any(c.strip() for c in cells):
            continue
        row = []
        for c, cell in enumerate(cells):
            try:
                row.append(float(cell))
            except ValueError:
                raise ScenarioError(f"{field}[{len(rows)}][{c}]", f"expected a number, got {kind(cell.strip())} "
                                    f"({where}, line {line})") from None
        rows.append(row)
    if not rows:
        raise ScenarioError(field, f"{where} holds no numbers; expected rows of comma-separated numbers")
    return rows


def _why(err: Exception) -> str:
    return one_line(getattr(err, "strerror", None) or str(err) or type(err).__name__, 120)
