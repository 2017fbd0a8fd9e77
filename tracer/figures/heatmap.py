"""Each chosen step as a labelled heatmap: token labels, every cell's number as the TUI writes it,
a colour bar, the step's title and formula; large matrices keep only the colours and say so."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..labels import axis_title
from ..printing import DECIMALS_NOTE, fractions_for, is_decimal
from .common import MASKED, RC, SEQUENTIAL, caption, finite_extent, ink_for, number_writer, step_names, text_width, tick_step
MAX_NUMBERED = 16    # rows or columns beyond this: no numbers in the cells (they could not be read)
MAX_LABELS = 40      # tick labels per axis beyond this: only every k-th is written
MAX_COLUMNS = 2      # panels side by side
SUPTITLE_H = 0.4
MARGIN = 0.2         # inches left free at the figure's sides


@dataclass
class Box:
    """A panel's layout in inches: margins around the matrix, and the matrix itself. Laid out by
    hand rather than by matplotlib's constrained layout, which costs more than the drawing."""
    left: float
    top: float
    right: float
    bottom: float
    width: float
    height: float
    upright: bool   # column labels turned upright (long, or many)

    @property
    def size(self) -> tuple[float, float]:
        return self.left + self.width + self.right, self.top + self.height + self.bottom


def draw(trace, steps, Figure):
    """One panel per step, in a grid of at most MAX_COLUMNS columns."""
    texts = {s.id: _texts(trace, s) if _numbered(s) else None for s in steps}
    boxes = [_box(trace, s, texts[s.id]) for s in steps]
    ncols = min(MAX_COLUMNS, len(steps))
    nrows = math.ceil(len(steps) / ncols)
    cell_w, cell_h = max(b.size[0] for b in boxes), max(b.size[1] for b in boxes)
    line = caption(trace)
    if text_width(line, 9) + 2 * MARGIN > ncols * cell_w:   # too wide: the arithmetic on a line of its own
        line = line.replace("  ·  ", "\n", 1)
    width = max(ncols * cell_w, text_width(line, 9) + 2 * MARGIN)   # the caption is never cut
    top = SUPTITLE_H + 0.17 * line.count("\n")
    height = nrows * cell_h + top
    inset = (width - ncols * cell_w) / 2                             # the panels centred under it
    fig = Figure(figsize=(width, height))
    fig.text(0.5, 1 - 0.12 / height, line, ha="center", va="top", fontsize=9, color="#444444")
    for n, (step, box) in enumerate(zip(steps, boxes)):
        x0, y0 = inset + (n % ncols) * cell_w + box.left, top + (n // ncols) * cell_h + box.top
        ax = fig.add_axes((x0 / width, 1 - (y0 + box.height) / height, box.width / width, box.height / height))
        bar = fig.add_axes(((x0 + box.width + 0.12) / width, 1 - (y0 + box.height) / height, 0.13 / width,
                            box.height / height))
        _panel(fig, ax, bar, trace, step, texts[step.id], box)
    return fig


def _texts(trace, step) -> list[list[str]]:
    write = number_writer(trace, trace[step.id])
    return [[write(v) for v in row] for row in trace[step.id]]


def _numbered(step) -> bool:
    return max(step.shape) <= MAX_NUMBERED


def _box(trace, step, texts) -> Box:
    """Cells wide enough for their longest number; room for the labels, title and colour bar."""
    rows, cols = step.shape
    row_names, col_names = step_names(trace, step)
    upright = cols > 6 or max(map(len, col_names[:MAX_LABELS])) > 4
    # inches of the longest label, measured: a w is twice an i (labels are cut to LABEL_WIDTH characters)
    longest = lambda names: max(text_width(n, 8) for n in names[:MAX_LABELS])  # noqa: E731
    label_h = longest(col_names) + 0.1 if upright else 0.2
    if texts is None:
        side = 5.0  # the cells are not square here (aspect="auto"): a thin matrix stays legible
        width, height = side * min(1.0, max(0.45, cols / rows)), side * min(1.0, max(0.45, rows / cols))
        notes = 1 + (rows > MAX_LABELS) + (cols > MAX_LABELS)
    else:
        cell = max(0.42, 0.075 * max(len(t) for row in texts for t in row) + 0.18)
        width, height, notes = cols * cell, rows * cell, 2 * _decimals(trace, texts)
    left = 0.4 + longest(row_names)
    top = 0.5 + 0.2 + label_h   # two lines of title, the axis name, the column labels
    title = text_width(_title(step), RC["axes.titlesize"])   # starts at the matrix's left edge
    right = max(0.75, title - width + MARGIN)
    return Box(left, top, right, 0.2 + 0.14 * notes, width, height, upright)


def _decimals(trace, texts) -> bool:
    """Whether a table of fractions writes a decimal (and so says why under it)."""
    return fractions_for(trace) and any(is_decimal(t) for row in texts for t in row)


def _title(step) -> str:
    return f"{step.id}: {step.title}\n{step.formula}"


def _colours(step, a):
    """(colour map, norm): a sequential map from 0 for weights, powers, sums and shares; a diverging one
    centred on 0 elsewhere (scores, projections), so that the sign reads at a glance."""
    from matplotlib import colormaps
    from matplotlib.colors import Normalize
    low, high = finite_extent(a)
    if step.kind in SEQUENTIAL:
        cmap, norm = colormaps["viridis"], Normalize(0.0, high if high > 0 else 1.0)
    else:
        top = max(abs(low), abs(high)) or 1.0
        cmap, norm = colormaps["RdBu_r"], Normalize(-top, top)
    return cmap.with_extremes(bad=MASKED), norm


def _panel(fig, ax, bar, trace, step, texts, box: Box) -> None:
    a = np.asarray(trace[step.id], dtype=np.float64)
    rows, cols = a.shape
    cmap, norm = _colours(step, a)
    shown = np.ma.masked_invalid(a)  # −∞ (masked) cells take the grey 'bad' colour
    image = ax.imshow(shown, cmap=cmap, norm=norm, aspect="equal" if texts is not None else "auto",
                      interpolation="nearest" if texts is not None else "antialiased")
    fig.colorbar(image, cax=bar)
    bar.tick_params(labelsize=7)
    if step.id == "idx.scores":   # the lightning indexer's choice: each query's kept keys outlined
        _outline(ax, np.asarray(trace["idx.selected"]) != 0)
    # y given: matplotlib would otherwise lift the title over the top labels itself, on top of the pad
    ax.set_title(_title(step), loc="left", y=1.0, pad=(box.top - 0.48) * 72)  # points, above the labels
    notes = []
    for axis, count, name, names in zip((ax.yaxis, ax.xaxis), (rows, cols), step.axes, step_names(trace, step)):
        every = tick_step(count, MAX_LABELS if count <= MAX_LABELS else 20)
        axis.set_ticks(range(0, count, every), [names[i] for i in range(0, count, every)])
        if every > 1:
            notes.append(f"one {name} label in {every}")
    ax.set_ylabel("" if step.axes[0] == "one" else axis_title(step.axes[0], step.kind))
    ax.set_xlabel(axis_title(step.axes[1], step.kind))
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    ax.tick_params(length=0, labelsize=8)
    if box.upright:
        ax.tick_params(axis="x", labelrotation=90)
    if texts is None:
        notes.insert(0, f"{rows} × {cols} cells: colours only (numbers are written up to {MAX_NUMBERED} a side)")
    else:
        _numbers(ax, image, a, texts)
        if _decimals(trace, texts):
            notes.append(DECIMALS_NOTE.replace(" with ", "\nwith ", 1))   # two short lines under a small matrix
    if notes:
        ax.text(0.5, -0.02, "\n".join(notes), transform=ax.transAxes, ha="center", va="top", fontsize=7,
                color="#555555")


def _outline(ax, cells: np.ndarray) -> None:
    """A black frame round each True cell (one SVG group, `idx.kept`)."""
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle
    frames = [Rectangle((c - 0.5, r - 0.5), 1, 1) for r, c in np.argwhere(cells)]
    group = PatchCollection(frames, facecolor="none", edgecolor="black", linewidth=1.5)
    group.set_gid("idx.kept")
    ax.add_collection(group)


def _numbers(ax, image, a, texts) -> None:
    """Each cell's number, in black or white by the cell's colour."""
    colours = image.to_rgba(np.ma.masked_invalid(a))
    for r, row in enumerate(texts):
        for c, text in enumerate(row):
            ink = "black" if not np.isfinite(a[r, c]) else ink_for(colours[r, c])
            ax.text(c, r, text, ha="center", va="center", fontsize=8, color=ink)
