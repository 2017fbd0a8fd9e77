"""Attention as lines, as BertViz draws it: the query tokens down one column, the key tokens down
another, each pair joined by a line whose opacity is its weight; one panel and one colour per head
(heads drawn over one another would hide each other: ALiBi's heads join the same pairs)."""
from __future__ import annotations

import math

import numpy as np

from ..mechanisms import dropped_cells

from ..errors import ScenarioError
from ..ids import step_id
from .common import caption, step_names, text_width

# Okabe–Ito: told apart with any of the common colour-vision deficiencies
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
MAX_TOKENS = 64    # n² lines per head: beyond this the figure is a grey blur; a heatmap reads better
ROW_H = 0.26       # inches per token
SPAN = 2.0         # inches between the query column and the key column
GAP = 0.1          # inches between a column of labels and the lines
MAX_COLUMNS = 4    # panels side by side
TOP, HEADER = 0.85, 0.55  # inches: the figure's titles; a panel's id and column names


def check(trace, steps) -> None:
    not_weights = [s.id for s in steps if s.kind != "weights"]
    if not_weights:
        raise ScenarioError("--step", f"the lines figure draws attention weights; expected ids such as "
                            f"{step_id('weights', 0)}, got {not_weights[0]!r}")
    if len(steps) > len(COLOURS):
        raise ScenarioError("--step", f"expected at most {len(COLOURS)} heads in one lines figure (one colour "
                            f"each), got {len(steps)}")
    n = max(trace.scenario.n, len(trace.scenario.key_tokens))
    if n > MAX_TOKENS:
        raise ScenarioError("--figure", f"a lines figure joins every query to every key; expected at most "
                            f"{MAX_TOKENS} tokens, got {n}; use --figure heatmap")


def strengths(trace, step) -> np.ndarray:
    """Each line's opacity (query × key): the weight itself, or the weight over the largest one
    when they are not a distribution (ReLU weights can exceed 1)."""
    w = np.asarray(trace.rows(step.id), dtype=np.float64)
    top = w.max() if w.size else 0.0
    return np.clip(w / top if top > 1 else w, 0.0, 1.0)


def _names(trace, step) -> tuple[list[str], list[str]]:
    """(query labels, key labels) of a weights step, whatever the layout."""
    rows, cols = step_names(trace, step)
    return (cols, rows) if trace.columns else (rows, cols)


def draw(trace, steps, Figure):
    names = [_names(trace, s) for s in steps]
    label_w = max(text_width(n, 9) for q, k in names for n in q + k)   # measured: nothing is cut
    panel_w = 2 * (label_w + GAP) + SPAN + 0.3
    ncols = min(MAX_COLUMNS, len(steps))
    nrows = math.ceil(len(steps) / ncols)
    tall = max(max(len(q), len(k)) for q, k in names)
    panel_h = HEADER + ROW_H * tall + 0.15
    relu = trace.arithmetic.normalize == "relu"
    note = ("a line's opacity is its weight ÷ the largest weight" if relu else "a line's opacity is its weight") \
        + "\n" + caption(trace, title=False)
    title = "Attention weights: each query joined to each key" + (", one panel per head" if len(steps) > 1 else "")
    width = max(ncols * panel_w, text_width(note, 7) + 0.4, text_width(title, 10) + 0.6)
    height = TOP + nrows * panel_h
    fig = Figure(figsize=(width, height))
    fig.suptitle(title, fontsize=10, y=1 - 0.08 / height)
    fig.text(0.5, 1 - 0.42 / height, note, ha="center", va="top", fontsize=7, color="#444444")
    inset = (width - ncols * panel_w) / 2
    for n, (step, colour, (queries, keys)) in enumerate(zip(steps, COLOURS, names)):
        x0 = inset + (n % ncols) * panel_w + 0.15 + label_w + GAP
        y0 = TOP + (n // ncols) * panel_h + HEADER
        ax = fig.add_axes((x0 / width, 1 - (y0 + ROW_H * tall) / height, SPAN / width, ROW_H * tall / height))
        _panel(ax, trace, step, colour, queries, keys, tall)
    return fig


def _panel(ax, trace, step, colour: str, queries: list[str], keys: list[str], tall: int) -> None:
    """One head: every query (left) joined to every key (right), in order: segment i·m + j joins
    query i to key j."""
    from matplotlib.collections import LineCollection
    from matplotlib.colors import to_rgb
    n, m = len(queries), len(keys)
    ax.set_xlim(0, 1)
    ax.set_ylim(tall - 0.5, -0.5)
    ax.axis("off")
    ends = np.array([[(0.0, i), (1.0, j)] for i in range(n) for j in range(m)]).reshape(-1, 2, 2)
    rgba = np.zeros((n * m, 4))
    rgba[:, :3] = to_rgb(colour)
    rgba[:, 3] = strengths(trace, step).ravel()
    lines = LineCollection(ends, colors=rgba, linewidths=2.0, capstyle="round")
    lines.set_gid(step.id)  # the SVG group of this head's lines carries the step id
    ax.add_collection(lines)
    gone = dropped_cells(trace, step)   # keys a mechanism dropped (an indexer): dotted grey, not left out
    if gone is not None and gone.any():
        at = np.argwhere(gone.T if trace.columns else gone)
        dots = LineCollection(ends[at[:, 0] * m + at[:, 1]], colors="#999999", linewidths=1.0, linestyles=":")
        dots.set_gid(step.id + ".dropped")
        ax.add_collection(dots)
    for i, name in enumerate(queries):
        ax.text(-GAP / SPAN, i, name, ha="right", va="center", fontsize=9)
    for j, name in enumerate(keys):
        ax.text(1 + GAP / SPAN, j, name, ha="left", va="center", fontsize=9)
    ax.text(-GAP / SPAN, -0.9, "query", ha="right", va="bottom", fontsize=9, weight="bold")
    ax.text(1 + GAP / SPAN, -0.9, "key", ha="left", va="bottom", fontsize=9, weight="bold")
    ax.text(0.5, -1.6, step.id, ha="center", va="bottom", fontsize=10, weight="bold", color=colour)
