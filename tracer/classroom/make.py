"""`attnsim class make`: a class folder with, per student sNN, the printable sheet (sNN.pdf), the
md worksheet, the scenario file and the blank answer sheet (sNN.csv); the key (key.pdf, key.json)."""
from __future__ import annotations

import csv
import io
import json
import os
import re
import secrets
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from ..errors import ScenarioError
from ..export import write_export
from ..labels import axis_labels
from ..scenario.build import build, load_scenario
from ..scenario.files import read_toml, resolve_path
from ..tomlfile import parse_toml
from ..trace import run
from ..writing import spreadsheet_text
from . import MAX_STUDENTS
from . import folder as place
from . import printing, tomltext
from .identity import fingerprint
from .variants import BOUND, PRESET, refuse_document, refuse_unfillable, variants

HEADER = ("step", "row", "col", "value", "row_label", "col_label")   # the CSV export's columns


@dataclass
class Made:
    """What `make_class` wrote, for the one line the command prints."""
    folder: Path
    ids: list[str]
    seed: int
    scenario: str


def check_students(text) -> int:
    """--students as a whole number from 1 to MAX_STUDENTS."""
    try:
        n = int(str(text).strip())
    except ValueError:
        n = None
    if n is None or not 1 <= n <= MAX_STUDENTS:
        raise ScenarioError("--students", f"expected a whole number from 1 to {MAX_STUDENTS}, got {text!r}")
    return n


def student_ids(n: int) -> list[str]:
    """s01, s02, …; three digits from 100 students on, so that the names still sort."""
    width = max(2, len(str(n)))
    return [f"s{i:0{width}d}" for i in range(1, n + 1)]


def make_class(spec, students, out, *, seed: int | None = None, force: bool = False) -> Made:
    """Writes a class of `students` sheets of the scenario `spec` (a built-in name or a .toml
    path) into the folder `out`, all at once or not at all. The same seed gives the same bytes."""
    n = check_students(students)
    seed = secrets.randbelow(10**6) if seed is None else seed
    if not isinstance(seed, int) or seed < 0:
        raise ScenarioError("--seed", f"expected a whole number ≥ 0, got {seed!r}")
    path = resolve_path(spec)
    original = read_toml(path)
    refuse_document(original, original.get("name") if isinstance(original.get("name"), str) else path.stem)
    scenario = load_scenario(spec)
    refuse_unfillable(scenario)
    target, ids = Path(out), student_ids(n)
    names = place.class_files(ids)
    place.check_target(target, force, names)
    key = {"schema": place.SCHEMA, "scenario": scenario.name, "title": scenario.title, "seed": seed,
           "arithmetic": PRESET, "bound": BOUND, "labels": {}, "students": []}
    with place.built_in_place(target, force, names) as tmp:
        sheets, keys = [], []
        for sid, (drawn, searched, _) in zip(ids, variants(scenario, n, seed, lambda s: run(s, PRESET))):
            trace = _student(tmp, sid, original, scenario, drawn, searched, seed)
            key["students"].append(_key_entry(sid, trace))
            key["labels"] = key["labels"] or _labels(trace)   # the same for every student
            sheets.append((sid, trace))
        _write_pdfs(tmp, sheets)
        (tmp / place.KEY).write_text(_json(key), encoding="utf-8")
    return Made(target, ids, seed, scenario.name)


def _student(tmp: Path, sid: str, original: dict, scenario, drawn, searched, seed: int):
    """Writes sNN.toml, .md and .csv; returns the student's trace, computed from the file written
    (so that the key is what the TUI's `o` shows for that file), which must be the trace searched:
    the same steps (none of the lesson's mechanisms lost on the way), the same numbers."""
    doc = tomltext.student_document(original, drawn, f"{scenario.name}-{sid}",
                                    f"{scenario.title or scenario.name} ({sid})")
    text = tomltext.dumps(doc, f"student {sid} of a class made from {scenario.name} "
                               f"(attnsim class make, seed {seed}); numbers of its own, the lesson's shapes")
    path = tmp / f"{sid}.toml"
    path.write_text(text, encoding="utf-8")
    mine = build(parse_toml(text, str(path)), default_name=sid)
    trace = run(mine)
    if fingerprint(mine) != fingerprint(drawn) or not _same(trace, searched):
        raise RuntimeError(f"{sid}.toml does not give the sheet searched for it")
    write_export(trace, tmp / f"{sid}.md", "md", blank=True)
    (tmp / f"{sid}.csv").write_text(answer_sheet(trace), encoding="utf-8")
    return trace


def _same(a, b) -> bool:
    """Two traces of the same steps with the same numbers (−inf where masked)."""
    return [s.id for s in a.steps] == [s.id for s in b.steps] and all(
        np.array_equal(a[s.id], b[s.id]) for s in a.steps)


def computed(trace) -> list:
    """The steps a student computes: every step but the given input (the quiz asks the same)."""
    return [s for s in trace.steps if s.inputs]


def answer_sheet(trace) -> str:
    """The CSV export's rows of the computed steps, `value` empty: a sheet to fill in (in a
    spreadsheet: its labels disarmed, as the export's)."""
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(HEADER)
    for sid, (rows, cols) in _labels(trace).items():
        rows, cols = [spreadsheet_text(t) for t in rows], [spreadsheet_text(t) for t in cols]
        out.writerows((sid, r, c, "", rows[r], cols[c]) for r in range(len(rows)) for c in range(len(cols)))
    return buf.getvalue()


def _labels(trace) -> dict[str, list]:
    """Each computed step's row and column labels, as the CSV export writes them."""
    return {step.id: [axis_labels(trace, axis, size) for axis, size in zip(step.axes, step.shape)]
            for step in computed(trace)}


def _key_entry(sid: str, trace) -> dict:
    """A student's expected cells, exactly: `27/46`, `3`, `-inf`."""
    from .variants import as_fractions
    cells = {}
    for step in computed(trace):
        exact = as_fractions(trace[step.id])
        if any(v is None for v in exact):   # the search made sure of it; never hand out a wrong key
            raise RuntimeError(f"{sid}: {step.id} has a cell that is no small fraction")
        width = step.shape[1]
        cells[step.id] = [[_exact(v) for v in exact[r * width:(r + 1) * width]] for r in range(step.shape[0])]
    return {"id": sid, "name": trace.scenario.name, "fingerprint": fingerprint(trace.scenario), "cells": cells}


def _json(doc: dict) -> str:
    """Indented JSON with each row of values on one line (a line break never occurs in a JSON
    string, so only the layout between values is changed)."""
    text = json.dumps(doc, ensure_ascii=False, indent=1)
    return re.sub(r'\[\n\s*((?:"(?:[^"\\\n]|\\.)*",\n\s*)*"(?:[^"\\\n]|\\.)*")\n\s*\]',
                  lambda m: "[" + re.sub(r",\n\s*", ", ", m.group(1)) + "]", text) + "\n"


def _exact(v) -> str:
    return "-inf" if not isinstance(v, Fraction) else str(v)


def _write_pdfs(tmp: Path, sheets: list) -> None:
    """Each student's blank sheet (sNN.pdf), and every filled one in key.pdf. On two cores the key
    is written by a forked copy of this process meanwhile (drawing text is most of a class's time)."""
    def key() -> None:
        pages = (page for sid, trace in sheets for page in printing.sheet(trace, sid, blank=False))
        printing.write_pdf(tmp / "key.pdf", pages)

    child = _fork(key) if len(sheets) > 1 and (os.cpu_count() or 1) > 1 else None
    try:
        for sid, trace in sheets:
            printing.write_pdf(tmp / f"{sid}.pdf", printing.sheet(trace, sid, blank=True))
    except BaseException:
        if child is not None:
            child.terminate()   # this side failed: the folder is about to go, and the key with it
            child.join()        # gone first: else it may write key.pdf into the folder being removed
        raise
    if child is None:
        key()
        return
    child.join()
    if child.exitcode != 0:
        raise ScenarioError("-o", f"key.pdf could not be written (exit code {child.exitcode}); expected a writable "
                            "folder with free space")


def _fork(job):
    """`job` running in a forked copy of this process, or None where there is no fork."""
    import multiprocessing
    if "fork" not in multiprocessing.get_all_start_methods():
        return None
    child = multiprocessing.get_context("fork").Process(target=_quietly, args=(job,), daemon=True)
    child.start()
    return child


def _quietly(job) -> None:
    """A forked job: its failure is its exit code, said once by the parent in one line."""
    try:
        job()
    except BaseException:
        os._exit(1)
