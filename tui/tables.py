"""Plain-text rendering of trace steps and of a two-arithmetic diff, for `attnsim show` / `diff`."""
from __future__ import annotations

import itertools
import re
import textwrap

import numpy as np

from tracer.labels import LABEL_WIDTH, axis_labels, axis_title, keys_text, short, step_labels, top_keys  # noqa: F401
from tracer.printing import DECIMALS_NOTE, fractions_for, is_decimal, table_writer, tolerance

MAX_SHOWN = 12  # rows/columns printed before eliding the middle, unless --full
MAX_LABEL = LABEL_WIDTH  # characters of a token or feature name in a table (a cut one ends in its index)


def _pick(size: int, full: bool) -> list[int | None]:
    """Indices to print; None marks an elided run."""
    if full or size <= MAX_SHOWN:
        return list(range(size))
    half = MAX_SHOWN // 2
    return [*range(half), None, *range(size - half, size)]


def step_table(trace, step, fractions: bool = True, full: bool = False) -> str:
    """One step as a titled, aligned table with its axes labelled."""
    return "\n".join(step_lines(trace, step, fractions, full))


def step_lines(trace, step, fractions: bool = True, full: bool = False):
    """The table's lines one by one: a --full table of millions of cells is never one string
    (its column widths are measured in a first pass); labels are cut to MAX_LABEL characters
    (a megabyte token would widen every row)."""
    a = trace[step.id]
    ra, ca = (axis_title(axis, step.kind) for axis in step.axes)
    yield (f"{step.id}  {step.title}:  {step.formula}   [{ra} × {ca}, "
           f"{a.shape[0]} × {a.shape[1]}]")
    yield from _body(trace, a, step_labels(trace, step, MAX_LABEL), f"{ra}\\{ca}", fractions, full)


def given_lines(trace, name: str, axes: tuple[str, str], a, fractions: bool = True, full: bool = False):
    """A given matrix (an input, a weight) as a table, named as the TUI names it: `W_Q (head 0)`."""
    from tracer.given_inputs import display_name
    ra, ca = (axis_title(axis) for axis in axes)
    yield f"{display_name(trace, name)}  (given: {name})   [{ra} × {ca}, {a.shape[0]} × {a.shape[1]}]"
    names = tuple(axis_labels(trace, axis, size, width=MAX_LABEL) for axis, size in zip(axes, a.shape))
    yield from _body(trace, a, names, f"{ra}\\{ca}", fractions, full)


def _body(trace, a, names, corner: str, fractions: bool, full: bool):
    rows, cols = _pick(a.shape[0], full), _pick(a.shape[1], full)
    row_names, col_names = names
    elided = None in rows or None in cols   # measured on what is printed, without a copy of a --full table
    shown = a[np.ix_([r for r in rows if r is not None], [c for c in cols if c is not None])] if elided else a
    fractions = fractions and fractions_for(trace)
    write = table_writer(shown, fractions, tolerance(a.dtype))
    decimals = False   # a table of fractions that still writes a decimal says why

    def line(r) -> list[str]:
        if r is None:
            return ["⋮"] + ["⋮" if c is not None else "" for c in cols]
        return [row_names[r]] + [write(a[r, c]) if c is not None else "…" for c in cols]
    top = [short(corner, width=MAX_LABEL)] + [col_names[c] if c is not None else "…" for c in cols]
    widths = [len(cell) for cell in top]
    for r in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, line(r))]
    for n, row in enumerate(itertools.chain([top], map(line, rows))):
        cells = [row[0].ljust(widths[0])] + [cell.rjust(w) for cell, w in zip(row[1:], widths[1:])]
        decimals = decimals or (n > 0 and fractions and any(map(is_decimal, row[1:])))
        yield "  " + "  ".join(cells)
    if decimals:
        yield f"  ({DECIMALS_NOTE})"


def lesson_text(description: str, width: int = 100) -> str:
    """A scenario's lesson as `show` prints it: each paragraph wrapped, the TUI's key hints left out."""
    from tracer.errors import one_line
    from tracer.export import worksheet_words
    paragraphs = (worksheet_words(one_line(" ".join(p.split()), 20000))
                  for p in re.split(r"\n\s*\n", description.strip()))
    return "\n\n".join(textwrap.fill(p, width, break_on_hyphens=False) for p in paragraphs if p)


def diff_rows(a, b) -> list[tuple[str, str, str]]:
    """(step id, largest difference, note) for every step of either trace."""
    out = []
    ids = [s.id for s in a.steps] + [s.id for s in b.steps if s.id not in a]
    tokens = a.scenario.tokens
    for sid in ids:
        if sid not in a or sid not in b:
            out.append((sid, "", f"only under {'a' if sid in a else 'b'}"))
            continue
        x, y = a.rows(sid).astype(np.float64), b.rows(sid).astype(np.float64)
        if x.shape != y.shape:
            out.append((sid, "", f"shapes differ: {x.shape} vs {y.shape}"))
            continue
        both_inf = np.isinf(x) & np.isinf(y) & (np.sign(x) == np.sign(y))
        with np.errstate(invalid="ignore"):  # −∞ − −∞ is nan; those cells are the same, set to 0
            d = np.where(both_inf, 0.0, np.abs(x - y))
        note = ""
        if a.step(sid).kind == "weights":
            changed = [(i, p, q) for i, (p, q) in enumerate(zip(top_keys(x), top_keys(y))) if p != q]
            keys = a.scenario.key_tokens
            note = ("most-attended key changes for " + "; ".join(
                f"{tokens[i]}: {keys_text(keys, p)} → {keys_text(keys, q)}" for i, p, q in changed[:6])
                + (f" (+{len(changed) - 6} more)" if len(changed) > 6 else "")) if changed else \
                "most-attended keys unchanged"
        if a.step(sid).kind in ("exp", "sums") and a.arithmetic.stable != b.arithmetic.stable:
            note = "a and b differ in stable: " + ("a" if a.arithmetic.stable else "b") + \
                " subtracts each query's max before the power, so these differ even where the weights agree"
        if a.step(sid).kind == "z" and a.arithmetic.algorithm != b.arithmetic.algorithm:
            rtol = 1e-4 if "float32" in (a.arithmetic.dtype, b.arithmetic.dtype) else 1e-10
            same = np.allclose(x, y, rtol=rtol, atol=rtol * max(np.abs(x).max(initial=0), 1e-300))
            note = (f"{a.arithmetic.algorithm} and {b.arithmetic.algorithm}: "
                    + ("equal up to rounding" if same else "DIFFER beyond rounding"))
        out.append((sid, f"{np.nanmax(d):.6g}" if d.size else "0", note))
    return out


def differing_keys(a, b) -> list[str]:
    """The arithmetic keys whose values differ between the two traces: `stable: true vs false`."""
    da, db = a.arithmetic.as_dict(), b.arithmetic.as_dict()
    shown = lambda v: str(v).lower() if isinstance(v, bool) else f"{v:g}" if isinstance(v, float) else str(v)  # noqa: E731
    return [f"{k}: {shown(da[k])} vs {shown(db[k])}" for k in da if k != "preset" and da[k] != db.get(k)]


def diff_table(a, b, name_a: str, name_b: str) -> str:
    rows = diff_rows(a, b)
    width = max(len(r[0]) for r in rows)
    keys = differing_keys(a, b)
    lines = [f"a = {name_a}, b = {name_b}",
             "keys that differ: " + ("; ".join(keys) if keys else "none (the same arithmetic)"),
             f"{'step'.ljust(width)}  {'max |a − b|':>12}  note"]
    lines += [f"{sid.ljust(width)}  {d:>12}  {note}".rstrip() for sid, d, note in rows]
    return "\n".join(lines)
