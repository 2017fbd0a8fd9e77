"""A student's scenario file: the original file's fields with the student's own numbers, written
as TOML the TUI's `o` opens (matrices one row a line, in the file's layout)."""
from __future__ import annotations

import json
import re

import numpy as np

from ..errors import one_line

# the fields a variant draws afresh, by the scenario's array (rows orientation) and file key
MATRICES = {"x": "x", "context": "context"}
WEIGHTS = {"w_q": "q", "w_k": "k", "w_v": "v", "w_v_down": "v_down", "w_v_up": "v_up", "w_o": "o"}
BIASES = {"b_q": "bq", "b_k": "bk", "b_v": "bv", "b_o": "bo"}
LESSON_NUMBERS = ("The lesson below works the original exercise's numbers; the tables of this sheet hold your own, "
                  "so your answers differ from the numbers it quotes.\n\n")


def student_document(original: dict, scenario, name: str, title: str) -> dict:
    """The original TOML document with the student's numbers in place of every matrix and bias, the
    student's name and title, and the by-hand arithmetic the sheet is computed with; what else the
    lesson gives (a sink's logit, QK-norm's gains and eps, the cap, the slopes) kept as it is."""
    columns = scenario.layout == "columns"
    flip = (lambda m: m.T) if columns else (lambda m: m)
    doc = {key: value for key, value in original.items() if key not in ("x", "context", "weights", "name", "title")}
    doc = {"name": name, "title": title, **doc, "arithmetic": "by-hand"}
    if isinstance(doc.get("description"), str):   # the lesson works the original's numbers, not the student's
        doc["description"] = LESSON_NUMBERS + doc["description"]
    for field, key in MATRICES.items():
        a = getattr(scenario, field)
        if a is not None:
            doc[key] = flip(a)
    drawn = {*WEIGHTS.values(), *BIASES.values()}   # the rest of [weights] (sinks, QK-norm's gains) is the lesson's
    kept = original.get("weights") if isinstance(original.get("weights"), dict) else {}
    weights = {key: value for key, value in kept.items() if key not in drawn}
    for field, key in WEIGHTS.items():
        a = getattr(scenario, field)
        if key == "v" and scenario.v_is_k:
            weights["v"] = "k"
        elif a is not None:
            mats = [flip(a)] if field == "w_o" else [flip(m) for m in a]   # one per head (or group)
            weights[key] = mats[0] if len(mats) == 1 else mats
    for field, key in BIASES.items():
        a = getattr(scenario, field)
        if a is not None and not (key == "bv" and scenario.v_is_k):
            weights[key] = a[0] if len(a) == 1 else a   # one vector per head, or one for all
    doc["weights"] = weights
    return doc


def dumps(doc: dict, comment: str = "") -> str:
    """TOML text of a document of strings, numbers, booleans, lists, NumPy matrices and tables
    (one level of tables, as a scenario has)."""
    lines = [f"# {one_line(line, 400)}" for line in comment.split("\n") if line]   # a name may hold anything
    plain = {k: v for k, v in doc.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in doc.items() if isinstance(v, dict)}
    lines += [f"{_key(k)} = {_value(v)}" for k, v in plain.items()]
    for name, table in tables.items():
        lines += ["", f"[{_key(name)}]"] + [f"{_key(k)} = {_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() and key.isascii() else _string(key)


def _string(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, and DEL must be escaped too; a text of
    several lines (a lesson) as a multi-line string, its line breaks kept."""
    body = json.dumps(text, ensure_ascii=False)[1:-1].replace("\x7f", "\\u007f")
    if "\n" not in text:
        return f'"{body}"'
    return '"""\n' + re.sub(r"(\\\\)|\\n", lambda m: m.group(1) or "\n", body) + '"""'


def _value(v, depth: int = 0) -> str:
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        v = float(v)
        return str(int(v)) if v.is_integer() and abs(v) < 2**53 else repr(v)
    if isinstance(v, (list, tuple)):
        if v and isinstance(v[0], (list, tuple, np.ndarray)) and depth == 0:   # a matrix: a row a line
            return "[\n" + "".join(f"  {_value(row, 1)},\n" for row in v) + "]"
        return "[" + ", ".join(_value(x, depth + 1) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x, depth + 1)}" for k, x in v.items()) + "}"
    raise TypeError(f"no TOML for {type(v).__name__}")
