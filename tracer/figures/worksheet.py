"""One head's whole computation on one sheet, laid out as the classroom worksheet: each product sits
beside the matrix that multiplies it; `blank` empties the computed cells for a class to fill in."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ScenarioError
from ..given_inputs import GIVEN_KINDS
from ..given_inputs import factor as given_factor
from ..ids import parse
from ..labels import short
from .common import GIVEN, MASKED, caption, labels, number_writer, step_names, text_width

MAX_TOKENS, MAX_FEATURES = 12, 16   # beyond this a sheet is no longer something to fill in by hand
CELL_H, LABEL_H, CAPTION_H = 0.27, 0.2, 0.26   # inches
CHAR_W = 0.068                      # inches per character at the cells' 8 pt
PAD, MARGIN, TITLE_H = 0.35, 0.35, 0.6
MAX_WIDTH = 14.0                    # inches: a wider row of panels wraps (a landscape sheet, or a slide)


@dataclass
class Panel:
    """A matrix to draw: its caption, its cells' texts, whether it is given (input, weights) or
    computed, and the names of its rows and columns (None where they are plain indices)."""
    caption: str
    cells: list
    given: bool
    row_names: list | None
    col_names: list | None
    values: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        return self.values.shape

    def width(self, cw: float) -> float:
        return self.shape[1] * cw

    def height(self) -> float:
        return CAPTION_H + LABEL_H + self.shape[0] * CELL_H

    def reach(self, cw: float) -> float:
        """Width taken, caption included."""
        return max(self.width(cw), len(self.caption) * CHAR_W * 1.1)


def check(trace, head: int) -> None:
    sc = trace.scenario
    big = max(sc.d_model, sc.d_k, sc.d_v)
    if sc.n > MAX_TOKENS or big > MAX_FEATURES:
        raise ScenarioError("--figure", f"a worksheet is for a sheet of paper: expected at most {MAX_TOKENS} tokens "
                            f"and {MAX_FEATURES} features, got {sc.n} tokens and {big} features; "
                            "use --figure heatmap with --step")
    if not 0 <= head < sc.heads:
        raise ScenarioError("--step", f"expected a head below {sc.heads}, got {head}")


def chain(trace, head: int) -> list:
    """The steps that make the head's output, in computation order (the input first)."""
    mine = [s for s in trace.steps if s.head == head]
    needed = {i for s in mine for i in s.inputs}
    return [s for s in trace.steps if s.head == head or (s.head is None and s.id in needed)]


def panels(trace, head: int, blank: bool) -> list[tuple[Panel, Panel | None]]:
    """Each step of the head as a panel, with the matrix it is multiplied by (its factor)."""
    return pairs(trace, chain(trace, head), blank)


def pairs(trace, steps, blank: bool) -> list[tuple[Panel, Panel | None]]:
    """Each of `steps` as a panel, with its factor: the weight a projection multiplies by (W_Q,
    latent attention's W_DKV, W_UK, …), Kᵀ beside the scores, V beside the weights, W_O beside the
    output (a class's sheet has it)."""
    out = []
    for step in steps:
        main = make_panel(trace, _caption(step), trace[step.id], step.axes, step.kind in GIVEN_KINDS, blank,
                          step_names(trace, step))
        factor, given_w = None, given_factor(trace, step)
        if given_w is not None:
            factor = make_panel(trace, f"{given_w[0]} (given)", given_w[1], ("", ""), True, blank)
        elif step.kind in ("scores", "absorbed"):  # Kᵀ, beside the queries it meets
            factor = _keys(trace, step, blank)
        elif step.kind == "z" and len(step.inputs) > 1:   # V, beside the weights that mix it (a linear
            #                                                  layer's z reads its o alone)
            v = trace.step(step.inputs[1])
            factor = make_panel(trace, "V", trace[v.id], v.axes, False, blank)
        out.append((main, factor))
    return out


def _keys(trace, step, blank: bool) -> Panel:
    """Kᵀ beside the scores; under latent attention the two key parts side by side, [K_NOPE, K_PE]ᵀ
    (or [C_KV, K_PE]ᵀ from the cache), as the scores add q_nope·k_nope and q_pe·k_pe."""
    keys = [trace.step(sid) for sid in step.inputs[1::2]]   # the factors read by key: every second input
    if len(keys) == 1:
        return make_panel(trace, "Kᵀ", trace[keys[0].id].T, keys[0].axes[::-1], False, blank)
    a = np.concatenate([trace[k.id] for k in keys], axis=0 if trace.columns else 1)
    title = "[" + ", ".join(parse(k.id).kind.upper() for k in keys) + "]ᵀ"
    return make_panel(trace, title, a.T, keys[0].axes[::-1], False, blank)


def make_panel(trace, title: str, a, axes, given: bool, blank: bool, step_labels=None) -> Panel:
    """A matrix as a panel: its cells written as the TUI writes them (empty when `blank` and
    computed), token names on token axes (a step's own labels when given: θ, sink)."""
    write = number_writer(trace, a)
    cells = [["" if blank and not given else write(v) for v in row] for row in a]
    names = [(step_labels[n] if step_labels else labels(trace, axis, size))
             if axis in ("token", "query", "key", "one") else None for n, (axis, size) in enumerate(zip(axes, a.shape))]
    return Panel(title, cells, given, names[0], names[1], np.asarray(a, dtype=np.float64))


def _caption(step) -> str:
    """The formula when it names its result (`Q = W_Q·X`), else the step's name before it."""
    if step.kind == "x":
        return "X (given)"
    if "=" in step.formula.split("(")[0]:
        return step.formula
    name = step.title.replace(f" (head {step.head})", "")
    return f"{name}: {step.formula}"


def draw(trace, head: int, blank: bool, Figure):
    pairs = panels(trace, head, blank)
    longest = max(len(t) for p in pairs for m in p if m for row in m.cells for t in row if t) or 1
    if blank:  # room for a hand-written fraction
        longest = max(longest, 5)
    cw = max(0.42, CHAR_W * longest + 0.16)
    placed, width, height = (_columns if trace.columns else _rows)(pairs, cw)
    sheet = "worksheet (blank: fill in the empty cells)" if blank else "worksheet"
    title, line = f"Self-attention, head {head}: {sheet}", caption(trace)
    width = max(width, text_width(title, 12, bold=True) + 2 * MARGIN, text_width(line, 8) + 2 * MARGIN)
    fig = Figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)  # inches, measured down from the top
    ax.axis("off")
    ax.text(MARGIN, MARGIN, title, fontsize=12, weight="bold", va="top")
    ax.text(MARGIN, MARGIN + 0.3, line, fontsize=8, color="#444444", va="top")
    for x, y, panel, row_names in placed:
        draw_panel(ax, x, y, panel, cw, row_names)
    return fig


def _columns(pairs, cw):
    """Tokens are columns: the products go down one column of panels, their factors at the left."""
    label_w = max((len(n) for m, f in pairs for n in (m.row_names or []) + ((f and f.row_names) or [])),
                  default=0) * CHAR_W + 0.15
    factor_w = max((f.reach(cw) for _, f in pairs if f), default=0.0)   # a caption wider than its matrix too
    x_main = MARGIN + label_w + factor_w + (PAD if factor_w else 0)
    y, placed, right = MARGIN + TITLE_H, [], 0.0
    for main, factor in pairs:
        if factor:
            placed.append((x_main - PAD - factor.reach(cw), y, factor, factor.row_names or main.row_names))
        placed.append((x_main, y, main, None if factor else main.row_names))
        right = max(right, x_main + main.reach(cw))
        y += max(main.height(), factor.height() if factor else 0) + PAD
    return placed, right + MARGIN, y + MARGIN - PAD


def _rows(pairs, cw):
    """Tokens are rows: the products go along a row of panels, their factors above them; a row
    wider than a sheet (MAX_WIDTH) goes on below, as text wraps."""
    label_w = max((len(n) for m, _ in pairs for n in (m.row_names or [])), default=0) * CHAR_W + 0.15
    reach = [max(m.reach(cw), f.reach(cw) if f else 0) + PAD for m, f in pairs]
    y, placed, right, start = MARGIN + TITLE_H, [], 0.0, 0
    while start < len(pairs):
        end, used = start + 1, reach[start]
        while end < len(pairs) and MARGIN + label_w + used + reach[end] - PAD <= MAX_WIDTH - MARGIN:
            used, end = used + reach[end], end + 1
        band = pairs[start:end]
        factor_h = max((f.height() for _, f in band if f), default=0.0)
        y_main = y + (factor_h + PAD if factor_h else 0)
        x = MARGIN + label_w
        for n, (main, factor) in enumerate(band):
            if factor:
                placed.append((x, y_main - PAD - factor.height(), factor, None))
            placed.append((x, y_main, main, main.row_names if n == 0 else None))
            x += reach[start + n]
        right = max(right, x - PAD)
        y = y_main + max(m.height() for m, _ in band) + 2 * PAD
        start = end
    return placed, right + MARGIN, y - 2 * PAD + MARGIN


def _fit(name: str, cw: float) -> str:
    """A column's name cut to its cell's width (a cut one keeps its index: `ww…#3`)."""
    if text_width(name, 7) <= cw - 0.04:
        return name
    return short(name, width=max(4, int((cw - 0.04) / 0.075)))


def draw_panel(ax, x, y, panel: Panel, cw: float, row_names) -> None:
    """A caption, column names, then a grid of cells; row names at the left when asked for."""
    from matplotlib.collections import PolyCollection
    ax.text(x, y + CAPTION_H - 0.06, panel.caption, fontsize=9, weight="bold", va="bottom")
    top = y + CAPTION_H + LABEL_H
    for c, name in enumerate(panel.col_names or []):
        ax.text(x + (c + 0.5) * cw, top - 0.04, _fit(name, cw), fontsize=7, color="#555555", ha="center",
                va="bottom")
    for r, name in enumerate(row_names or []):
        ax.text(x - 0.08, top + (r + 0.5) * CELL_H, name, fontsize=7, color="#555555", ha="right", va="center")
    boxes, faces = [], []
    for r, row in enumerate(panel.cells):
        for c, text in enumerate(row):
            masked = np.isneginf(panel.values[r, c])
            faces.append(MASKED if masked and text else GIVEN if panel.given else "white")
            left, upper = x + c * cw, top + r * CELL_H
            boxes.append(((left, upper), (left + cw, upper), (left + cw, upper + CELL_H), (left, upper + CELL_H)))
            if text:
                ax.text(x + (c + 0.5) * cw, top + (r + 0.5) * CELL_H, text, fontsize=8, ha="center", va="center")
    # one collection per grid: a sheet of many cells draws in a fraction of the time of one patch each
    ax.add_collection(PolyCollection(boxes, facecolors=faces, edgecolors="#888888", linewidths=0.6), autolim=False)
