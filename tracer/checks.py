"""Checks for the values of a scenario: matrices of finite numbers, words from a short list,
labels, unknown fields; each failure is a ScenarioError naming the field and what was expected."""
from __future__ import annotations

import difflib
import math
import numbers
import re

import numpy as np

from .errors import ScenarioError, one_line

FLOAT64_MAX = float(np.finfo(np.float64).max)
_SURROGATE = re.compile("[\ud800-\udfff]")


def kind(value) -> str:
    """What a value is, in a few words, for "got ..." (never its whole text)."""
    if isinstance(value, np.generic) and value.ndim == 0:
        value = value.item()  # 1.0, not np.float64(1.0)
    if isinstance(value, (bool, np.bool_)):
        return f"a boolean ({str(bool(value)).lower()})"
    if isinstance(value, str):
        return f"a string ({one_line(repr(value), 60)})"
    if isinstance(value, numbers.Integral) and abs(int(value)) > 10**30:
        return f"a whole number of {len(str(abs(int(value)) // 10**30)) + 30} digits"
    if isinstance(value, numbers.Number):
        return f"a number ({one_line(repr(value), 40)})"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, (list, tuple)):
        return "an empty list" if not value else f"a list of {len(value)}"
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    return f"a {type(value).__name__}"


def quoted(words) -> str:
    """"rows" or "columns", as a TOML file writes them."""
    words = [f'"{w}"' for w in words]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def suggest(word, choices) -> str:
    """' (did you mean "x"?)' for a near miss, else ''."""
    if not isinstance(word, str):
        return ""
    lower = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(word.lower(), list(lower), n=1, cutoff=0.6)
    return f' (did you mean "{lower[close[0]]}"?)' if close else ""


def unknown(keys, allowed, where: str = "") -> None:
    for key in keys:
        if key not in allowed:
            raise ScenarioError(f"{where}{key}", f"unknown field{suggest(key, allowed)}; "
                                f"expected one of {', '.join(allowed)}")


def choice(data: dict, key: str, choices, default: str, field: str | None = None) -> str:
    """A word from a short list."""
    value = data.get(key, default)
    if not isinstance(value, str) or value not in choices:
        raise ScenarioError(field or key, f"expected {quoted(choices)}, got {kind(value)}{suggest(value, choices)}")
    return value


def text(data: dict, key: str, default: str = "", single_line: bool = True) -> str:
    """A string; one line without control characters, or (a description) lines and tabs only:
    an escape sequence in a file must never reach a terminal."""
    value = data.get(key, default)
    if not isinstance(value, str):
        raise ScenarioError(key, f"expected a string, got {kind(value)}")
    lines = [value] if single_line else value.replace("\r\n", "\n").replace("\t", " ").split("\n")
    bad = next((line for line in lines if not _printable(line)), None)
    if bad is not None:
        what = "one line of text" if single_line else "text"
        raise ScenarioError(key, f"expected {what} without control characters or lone surrogates, got "
                            f"{one_line(repr(_first_bad(bad)), 20)} at character {value.index(_first_bad(bad))}")
    return value


def _printable(text: str) -> bool:
    """No control character (escaped by one_line) and no lone surrogate (not encodable as UTF-8)."""
    return one_line(text, len(text) + 1) == text and not _SURROGATE.search(text)


def _first_bad(text: str) -> str:
    return next(c for c in text if not _printable(c))


def labels(value, n: int, field: str = "tokens") -> list[str]:
    """n labels, one per token, each one line of text."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise ScenarioError(field, f"expected a list of {n} strings, got {kind(value)}")
    for i, label in enumerate(value):
        if not isinstance(label, str):
            raise ScenarioError(f"{field}[{i}]", f"expected a string, got {kind(label)}")
        if not _printable(label):
            raise ScenarioError(f"{field}[{i}]", "expected a label on one line, without control characters "
                                "or lone surrogates")
    if len(value) != n:
        what = {"features": "one per feature of x, d_model", "value_features": "one per value feature, d_v"}
        raise ScenarioError(field, f"expected {n} labels ({what.get(field, 'one per token of x')}), got {len(value)}")
    return [str(label) for label in value]


def number(value, field: str) -> float:
    """A finite float from an int or float (not a boolean, a string or an int beyond float64)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ScenarioError(field, f"expected a number, got {kind(value)}")
    try:
        out = float(value)
    except (OverflowError, ValueError):
        out = math.inf
    if not math.isfinite(out):
        why = "a finite number" if isinstance(value, float) else "a number within float64's range (±1.8e308)"
        raise ScenarioError(field, f"expected {why}, got {kind(value)}")
    return out


def _is_matrix(value) -> bool:
    """Looks like one matrix (not a list of them): a 2-D array or a list whose first item is a row."""
    if isinstance(value, np.ndarray):
        return value.ndim == 2
    return (isinstance(value, (list, tuple)) and len(value) > 0
            and (isinstance(value[0], (list, tuple)) or (isinstance(value[0], np.ndarray) and value[0].ndim == 1)))


def matrix(value, name: str) -> np.ndarray:
    """A non-empty rectangular matrix of finite numbers, as float64 (float32 arrays are kept)."""
    if isinstance(value, np.ndarray):
        value = np.asarray(value)  # drops subclasses (np.matrix, masked arrays)
        if value.ndim != 2 or value.size == 0:
            raise ScenarioError(name, f"expected a non-empty 2-D array, got shape {value.shape}")
        if value.dtype.kind not in "iuf":
            raise ScenarioError(name, f"expected an array of numbers (int or float), got dtype {value.dtype}")
        with np.errstate(over="ignore", invalid="ignore"):
            out = value if value.dtype in (np.float32, np.float64) else value.astype(np.float64)
        if not np.isfinite(out).all():
            r, c = np.argwhere(~np.isfinite(out))[0]
            raise ScenarioError(f"{name}[{r}][{c}]", f"expected a finite number within float64's range, got {value[r, c]}")
        return out
    if not isinstance(value, (list, tuple)) or not value:
        raise ScenarioError(name, f"expected a matrix (a non-empty list of rows of numbers), got {kind(value)}")
    if isinstance(value[0], (numbers.Number, str)):
        raise ScenarioError(name, f"expected a matrix (a list of rows), got a flat list of {len(value)}; "
                            "write a single row as [[...]]")
    rows, width = [], None
    for r, row in enumerate(value):
        if isinstance(row, np.ndarray) and row.ndim == 1:
            row = row.tolist()
        if not isinstance(row, (list, tuple)) or not row:
            raise ScenarioError(f"{name}[{r}]", f"expected a row (a non-empty list of numbers), got {kind(row)}")
        if width is None:
            width = len(row)
        elif len(row) != width:
            raise ScenarioError(f"{name}[{r}]", f"expected {width} numbers like row 0, got {len(row)} (ragged matrix)")
        rows.append([number(cell, f"{name}[{r}][{c}]") for c, cell in enumerate(row)])
    return np.array(rows, dtype=np.float64)


def per_head(value, name: str):
    """One matrix, or one per head: a list of matrices or a 3-D array (kept whole, without a copy)."""
    if isinstance(value, np.ndarray) and value.ndim == 3:
        value = np.asarray(value)
        if value.shape[0] == 0:
            raise ScenarioError(name, "expected at least one matrix (one per head), got none")
        if value.dtype in (np.float32, np.float64) and value.size:
            if not np.isfinite(value).all():
                h, r, c = np.argwhere(~np.isfinite(value))[0]
                raise ScenarioError(f"{name}[{h}][{r}][{c}]", f"expected a finite number, got {value[h, r, c]}")
            return value
        return [matrix(m, f"{name}[{h}]") for h, m in enumerate(value)]
    if isinstance(value, (list, tuple)) and value and _is_matrix(value[0]):
        mats = []
        for h, m in enumerate(value):
            if not _is_matrix(m):
                raise ScenarioError(f"{name}[{h}]", f"expected a matrix (one per head, like {name}[0]), got {kind(m)}")
            mats.append(matrix(m, f"{name}[{h}]"))
        return mats
    return [matrix(value, name)]


class Shapes:
    """Checks each matrix against the sizes already known, in the words of the file's layout."""

    def __init__(self, layout: str):
        self.layout, self.sizes, self.origin = layout, {}, {}

    def check(self, name: str, shape: tuple[int, int], rows_dims: tuple[str, str]) -> None:
        """shape as written in the file, its dims named in the rows orientation."""
        file_dims = rows_dims if self.layout == "rows" else rows_dims[::-1]
        for dim, size in zip(file_dims, shape):
            if dim in self.sizes and self.sizes[dim] != size:
                want = " × ".join(str(self.sizes.get(d, d)) for d in file_dims)
                raise ScenarioError(name, f"expected a {want} matrix ({' × '.join(file_dims)}, "
                                    f"{dim} = {self.sizes[dim]} from {self.origin[dim]}), got {shape[0]} × {shape[1]}")
        for dim, size in zip(file_dims, shape):
            self.sizes.setdefault(dim, size)
            self.origin.setdefault(dim, name)


def vectors(value, name: str, count: int, width: int, size: str = "") -> np.ndarray:
    """One bias vector for all `count` heads, or a list of one per head: count × width (`size`:
    the width's name, for the message)."""
    if isinstance(value, np.ndarray) and value.ndim == 1:
        value = value[None, :]
    if isinstance(value, (list, tuple)) and value and not isinstance(value[0], (list, tuple, np.ndarray)):
        value = [value]
    rows = matrix(value, name)
    if rows.shape[1] != width:
        raise ScenarioError(name, f"expected vectors of {width} numbers{f' ({size})' if size else ''}, got {rows.shape[1]}")
    if rows.shape[0] == 1:
        return np.repeat(rows, count, axis=0)
    if rows.shape[0] != count:
        raise ScenarioError(name, f"expected one vector for all heads or {count} (one per head), got {rows.shape[0]}")
    return rows


def positive(data: dict, key: str | None, default: float | None = None) -> float | None:
    """A finite number > 0 from a dict such as config.json (a cap, a scale), or None when there is
    no such key (`key` None: the family has none)."""
    if key is None:
        return None
    value = data.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < math.inf:
        raise ScenarioError(key, f"expected a finite number > 0, got {kind(value)}")
    return float(value)
