"""Trace exports: json, npz, csv and md (a worksheet), all holding the same trace; svg and png
are pictures, drawn by tracer.figures.

Every format is written to a temporary file beside the target and renamed over it only when
complete, so a failed or interrupted export never leaves a partial file or alters an old one.
"""
from __future__ import annotations

import html
import io
import json
import math
import os
import re
import zipfile
from pathlib import Path

import numpy as np

from . import mechanisms
from .errors import ScenarioError
from .given_inputs import GIVEN_KINDS, display_name, given, plus_zero
from .labels import axis_labels, axis_title, step_labels  # axis_labels also imported from here by tracer.figures
from .printing import DECIMALS_NOTE, fractions_for, is_decimal, table_writer, tolerance
from .writing import atomic_path, refuse_an_input, room, selected_steps, spreadsheet_text  # noqa: F401  (also the CLI's)

SCHEMA = "attnsim.trace/1"
FORMATS = ("json", "npz", "csv", "md", "svg", "png")
PICTURES = ("svg", "png")  # drawn by tracer.figures (matplotlib, loaded only for them)
BYTES_PER_CELL = {"npz": 8, "json": 25, "csv": 40, "md": 12}  # rough, for the disk-space check
TEXT_CELLS = {"json": 1 << 27, "csv": 1 << 27, "md": 1 << 20}  # beyond this, text helps nobody


def format_for(path: str | os.PathLike, fmt_name: str | None = None) -> str:
    """The format asked for, or the one PATH's extension names."""
    if not os.fspath(path):   # '' would be taken for the current folder
        raise ScenarioError("-o", "is empty; expected a file path, e.g. trace.json")
    if _is_folder(path):  # before the extension: a folder has none, and that is not the mistake
        raise ScenarioError("-o", f"{os.fspath(path)} is a folder; expected a file path in it, e.g. "
                            f"{os.path.join(os.fspath(path), 'trace.json')}")
    name = fmt_name or Path(path).suffix.lstrip(".").lower()
    if name not in FORMATS:
        what = f"--format {fmt_name!r}" if fmt_name else f"the extension of {os.fspath(path)!r}"
        raise ScenarioError("--format", f"expected one of {', '.join(FORMATS)}, got {what}")
    return name


def _is_folder(path) -> bool:
    try:
        return Path(path).is_dir()
    except OSError:   # a name too long, a folder we may not enter: atomic_path says so in one line
        return False


def check_blank(name: str, blank: bool, figure: str | None = "heatmap") -> None:
    """Only a worksheet can be blank: the md one, or the worksheet picture."""
    if blank and not (name == "md" or (name in PICTURES and figure == "worksheet")):
        what = f"{name} {figure or 'heatmap'} picture" if name in PICTURES else f"a {name} export"
        raise ScenarioError("--blank", f"expected md or a worksheet picture (--figure worksheet), not {what}: "
                            "only a worksheet has cells to leave empty")


def written(trace, name: str, steps=None) -> str:
    """What an export of `name` holds, in a few words: `10 steps (x … h0.z) and the inputs and
    weights (x, weights.q[0], …), 4 tokens`."""
    ids = [s.id for s in selected_steps(trace, steps)]
    span = ids[0] if len(ids) == 1 else f"{ids[0]} … {ids[-1]}"
    text = f"{len(ids)} step{'s' if len(ids) != 1 else ''} ({span})"
    names = [n for n, _, _ in given(trace)]
    text += f" and {len(names)} given matri{'ces' if len(names) != 1 else 'x'} ({', '.join(names[:4])}"
    text += ", …)" if len(names) > 4 else ")"
    return f"{text}, {trace.scenario.n} tokens, arithmetic {trace.arithmetic.preset}"


def document(trace, steps=None, data: bool = True) -> dict:
    """The trace as a JSON-ready dict (CONTRACT §5); without `data` it is the npz's `__meta__`."""
    doc = {"schema": SCHEMA, "scenario": trace.scenario.describe(),
           "arithmetic": trace.arithmetic.as_dict(), "warnings": list(trace.warnings), "steps": []}
    doc["scenario"]["layout"] = trace.layout
    doc["arithmetic"].update(layout=trace.layout, mask=mask_spec(trace))
    for step in selected_steps(trace, steps):
        entry = step.describe()
        if data:
            entry["data"] = _json_matrix(trace[step.id])
        doc["steps"].append(entry)
    doc["given"] = [_given_entry(name, axes, a, data) for name, axes, a in given(trace)]
    return doc


def _given_entry(name: str, axes, a: np.ndarray, data: bool) -> dict:
    """One input or weight matrix: its field name, axes and shape (and its numbers)."""
    entry = {"name": name, "axes": list(axes), "shape": list(a.shape)}
    if data:
        entry["data"] = _json_matrix(a)
    return entry


def mask_spec(trace):
    """The mask in force: "none", "causal", or the 0/1 matrix as the layout writes it."""
    if trace.allowed is None:
        return "none"
    spec = trace.scenario.mask if trace.arithmetic.mask is None else trace.arithmetic.mask
    if isinstance(spec, str):
        return spec
    m = trace.allowed.T if trace.columns else trace.allowed
    return m.astype(int).tolist()


def _json_matrix(a: np.ndarray) -> list:
    rows = plus_zero(a.astype(np.float64)).tolist()  # Python floats: repr round-trips exactly
    if np.isfinite(a).all():
        return rows
    return [[v if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
             for v in row] for row in rows]


def write_export(trace, path, fmt: str | None = None, steps=None, blank: bool = False,
                 figure: str = "heatmap") -> Path:
    """Writes the trace (or the chosen steps) to `path` in `fmt` (default: from the extension);
    a picture format draws `figure` (heatmap, worksheet or lines)."""
    name = format_for(path, fmt)
    check_blank(name, blank, figure)
    refuse_an_input(path, trace.scenario)
    if name in PICTURES:
        from .figures import write_figure
        return write_figure(trace, path, steps, kind=figure, blank=blank, fmt=name)
    chosen = selected_steps(trace, steps)
    cells = sum(s.shape[0] * s.shape[1] for s in chosen)
    need = cells * BYTES_PER_CELL[name]
    if cells > TEXT_CELLS.get(name, cells):
        raise ScenarioError("--format", f"a {name} export of {cells:,} numbers (about {need / 2**30:.1f} GiB) is more "
                            "than a text format should hold; expected npz, or fewer steps (--step)")
    room(Path(path).parent if str(Path(path).parent) else Path("."), need, "the export")
    writer = {"json": _write_json, "npz": _write_npz, "csv": _write_csv, "md": _write_md}[name]
    with atomic_path(path) as tmp:
        writer(trace, chosen, tmp, blank)
    return Path(path)


def _write_json(trace, steps, tmp: Path, blank: bool) -> None:
    head = document(trace, [], data=False)
    del head["steps"], head["given"]
    with open(tmp, "w", encoding="utf-8") as f:  # step by step, so a large trace is never one string
        f.write(json.dumps(head, ensure_ascii=False, allow_nan=False)[:-1] + ', "steps": [')
        for n, step in enumerate(steps):
            entry = step.describe()
            entry["data"] = _json_matrix(trace[step.id])
            f.write(("," if n else "") + json.dumps(entry, ensure_ascii=False, allow_nan=False))
        f.write('], "given": [')
        for n, (name, axes, a) in enumerate(given(trace)):
            entry = _given_entry(name, axes, a, True)
            f.write(("," if n else "") + json.dumps(entry, ensure_ascii=False, allow_nan=False))
        f.write("]}\n")


def _write_npz(trace, steps, tmp: Path, blank: bool) -> None:
    meta = json.dumps(document(trace, [s.id for s in steps], data=False), ensure_ascii=False)
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        members = [(step.id, trace[step.id]) for step in steps]  # arrays are views: nothing copied yet
        members += [(f"given/{name}", a) for name, _, a in given(trace)]
        for key, a in members:  # one member at a time, as numpy.savez lays them out
            with zf.open(f"{key}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.ascontiguousarray(plus_zero(a)), allow_pickle=False)
        with zf.open("__meta__.npy", "w") as member:
            np.lib.format.write_array(member, np.array(meta), allow_pickle=False)


def _write_csv(trace, steps, tmp: Path, blank: bool) -> None:
    """step,row,col,value as the contract has it, then the row's and the column's labels (token
    names, disarmed for a spreadsheet: `=SUM(A1)` is written `'=SUM(A1)`); the inputs and weights
    follow the steps, as `given/x`, `given/weights.q[0]`, …"""
    parts = [(s.id, s.axes, trace[s.id]) for s in steps] + [(f"given/{n}", ax, a) for n, ax, a in given(trace)]
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write("step,row,col,value,row_label,col_label\n")
        for key, axes, a in parts:
            rows, cols = ([_csv_field(spreadsheet_text(t)) for t in axis_labels(trace, axis, n)]
                          for axis, n in zip(axes, a.shape))
            buf = io.StringIO()
            for r in range(a.shape[0]):
                for c, v in enumerate(plus_zero(a[r]).tolist()):
                    buf.write(f"{key},{r},{c},{v!r},{rows[r]},{cols[c]}\n")
            f.write(buf.getvalue())


def _csv_field(text: str) -> str:
    """A label as one CSV field: quoted when it holds a comma, a quote or a line break."""
    return '"' + text.replace('"', '""') + '"' if any(ch in text for ch in ',"\r\n') else text


def _md_table(corner: str, row_labels, col_labels, cells) -> str:
    lines = ["| " + " | ".join(map(_md_cell, [corner, *col_labels])) + " |", "|" + "---|" * (len(col_labels) + 1)]
    lines += ["| " + " | ".join([f"**{_md_cell(r)}**", *row]) + " |" for r, row in zip(row_labels, cells)]
    return "\n".join(lines)


def _md_cell(text: str) -> str:
    """A label as one Markdown table cell: an unescaped | would split it in two."""
    return _md_text(text).replace("|", "\\|")


def _md_text(text: str) -> str:
    """User text as Markdown shows it, never as markup: a renderer passes raw HTML through, so a
    title or token `<script>…` or `<img onerror=…>` is escaped, as the SVG escapes it."""
    return html.escape(text, quote=False)


def _write_md(trace, steps, tmp: Path, blank: bool) -> None:
    """The worksheet handed to students: the lesson, the arithmetic in words, what is given, then
    each step's table (empty with `blank`, to be filled in by hand)."""
    sc = trace.scenario
    fractions, tol = fractions_for(trace), tolerance(trace.dtype)
    out = [f"# {_md_text(sc.title or sc.name)}", ""]
    if sc.description:
        out += [_md_text(worksheet_words(sc.description)), ""]
    out += [f"Layout: **{trace.layout}** · arithmetic: **{trace.arithmetic.preset}**: {arithmetic_words(trace)}.", ""]
    if given_words(trace):
        out += [f"Given besides the matrices: {given_words(trace)}.", ""]
    if blank:
        out += ["Fill in each table from the ones before it; each step's formula is under its title.", ""]
    for name, axes, a in given(trace):
        if name in ("x", "context") and any(s.id == name for s in steps):
            continue  # written below as a step
        out += [f"### Given: {_md_text(display_name(trace, name))}", "", _md_table(f"{axes[0]} \\ {axes[1]}", axis_labels(trace, axes[0], a.shape[0]),
                axis_labels(trace, axes[1], a.shape[1]), _cells(a, fractions, tol)), ""]
    for step in steps:
        a = trace[step.id]
        rows, cols = step_labels(trace, step)
        empty = blank and step.kind not in GIVEN_KINDS
        cells = [["" if empty else text for text in row] for row in _cells(a, fractions, tol)]
        ra, ca = (axis_title(axis, step.kind) for axis in step.axes)
        out += [f"## `{step.id}` — {_md_text(step.title)}", "", f"`{step.formula}`  ({ra} × {ca})", "",
                _md_table(f"{ra} \\ {ca}", rows, cols, cells), ""]
        if fractions and not empty and any(is_decimal(t) for row in cells for t in row):
            out += [f"({DECIMALS_NOTE})", ""]
    tmp.write_text("\n".join(out), encoding="utf-8")


def _cells(a, fractions: bool, tol: float) -> list[list[str]]:
    write = table_writer(a, fractions, tol)
    return [[write(v) for v in row] for row in a]


def worksheet_words(description: str) -> str:
    """A scenario's lesson as a printed sheet tells it: sentences about the app's keys left out."""
    sentences = re.split(r"(?<=[.!?])\s+", description.strip())
    return " ".join(s for s in sentences if not re.search(r"\b[Pp]ress\b", s)).strip()


def given_words(trace) -> str:
    """The numbers a scenario gives besides its matrices, as a sheet to work by hand must state
    them (the sinks' logits, the cap, ALiBi's slopes, QK-norm's eps: each mechanism's own words);
    empty when there are none."""
    said = (m.given_words(trace.scenario) for m in mechanisms.present(trace.scenario))
    return "; ".join(words for words in said if words)


def arithmetic_words(trace) -> str:
    """The arithmetic in force, in words: `⌊s ÷ 2⌋ for ÷√3, powers 3^s, raw powers, float64`."""
    from .steps.base import said
    told = said("arithmetic.words", trace)   # a layer without scores says its own (a linear layer's q̂)
    if told is not None:
        return told
    a, d_k = trace.arithmetic, trace.scenario.d_k
    c = a.scale_divisor(d_k)
    if a.scale in ("sqrt", "none"):   # no divisor to write (scale 1: Gemma 4's)
        scale = f"scores ÷ √{d_k}" if a.scale == "sqrt" else "scores not scaled"
    else:
        scale = f"⌊scores ÷ {c:g}⌋ in place of ÷ √{d_k}" if a.scale == "floor" else f"scores ÷ {c:g}"
    if a.normalize == "relu":
        return f"{scale}, then max(0, s) in place of softmax, {a.dtype}"
    base = "e" if a.softmax_base == "e" else f"{a.base:g}"
    powers = (f"powers {base}^(s − the query's largest score)" if a.stable
              else f"powers {base}^s (the raw powers, nothing subtracted)")
    return f"{scale}, {powers}, {a.dtype}"
