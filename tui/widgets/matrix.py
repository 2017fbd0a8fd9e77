"""A matrix as a heatmap with its axis labels, drawn with Textual's Line API: only the visible
window is formatted, so a 2048 × 2048 step scrolls as fast as a 4 × 4, and the labels stay put."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from .heat import Scale, scale_for
from .panel_scroll import Scrolling

LABEL = Style(color="grey70", bold=True)
LABEL_AT = Style(color="black", bgcolor="grey85", bold=True)
LABEL_LIT = Style(color="black", bgcolor="#87ff5f", bold=True)
CURSOR = Style(color="black", bgcolor="white", bold=True, underline=True)
LIT = Style(color="black", bgcolor="#87ff5f", bold=True)
HIDDEN = Style(color="grey62", bgcolor="grey19")  # a cell still to find: no colour that gives it away
DIMMED = Style(color="grey50", dim=True)          # a key the lightning indexer dropped (written with a ·)
MAX_LABEL = 10
ROOM = (MAX_LABEL, MAX_LABEL - 2)   # the characters a row's and a column's name get: labels are cut to
#                                     them before they come (labels.short ends a cut one in its index)


class MatrixView(Scrolling, ScrollView):
    """One step's array. With `cursor=True` it is focusable and moves a cell cursor (arrows, hjkl);
    `lit` cells (the sources of another view's cursor) are drawn highlighted."""

    BINDINGS = [
        Binding("up,k", "move(-1, 0)", "cell up", show=False),
        Binding("down,j", "move(1, 0)", "cell down", show=False),
        Binding("left,h", "move(0, -1)", "cell left", show=False),
        Binding("right,l", "move(0, 1)", "cell right", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("home", "edge(-1)", "first column", show=False),
        Binding("end", "edge(1)", "last column", show=False),
    ]

    @dataclass
    class CursorMoved(Message):
        """The cursor of `view` is now on (row, col)."""
        view: "MatrixView"
        row: int
        col: int

    def __init__(self, *, cursor: bool = False, id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        self.can_focus = cursor
        self.has_cursor = cursor
        self.array = np.zeros((0, 0))
        self.row_labels: list[str] = []
        self.col_labels: list[str] = []
        self.cursor = (0, 0)
        self.lit: set[tuple[int, int]] = set()
        self._lit_rows: dict[int, set[int]] = {}   # each lit row's lit columns (drawn a row at a time)
        self._lit_cols: set[int] = set()
        self.scale = Scale(self.array, True)
        self._label_w = self._cell_w = 1
        self._title_w = 0
        self.full_title = ""   # the border shows it cut at a word's end when the panel is narrower
        self.fractions = True
        self.hidden: np.ndarray | None = None  # True where a cell is drawn blank (a quiz, an unreached step)
        self.hide_text = "?"
        self.dimmed: np.ndarray | None = None  # True where a cell is drawn dim with a `·` (a dropped key)
        # drawn lines by (line, scroll, width, cursor): a border's title or count changing after a
        # re-layout draws the whole panel again, and it is the same lines
        self._lines: dict[tuple, Strip] = {}
        self._padded: dict[float, str] = {}   # a value's cell text, fitted and padded to the cell width
        self._borders: dict[str, str] = {}   # the border texts last set (see _border)
        self._scrolled_for: tuple | None = None   # the sizes the scrollbars were last updated for

    # ------------------------------------------------------------ feeding it
    def show(self, array: np.ndarray, row_labels: list[str], col_labels: list[str], *, title: str = "",
             fractions: bool = True, tol: float = 1e-15, cursor: tuple[int, int] | None = None,
             lit=(), hidden: np.ndarray | None = None, hide_text: str = "?", dimmed: np.ndarray | None = None) -> None:
        """Replaces what is drawn (the colour scale is measured once here, not per frame);
        `hidden` cells are drawn as `hide_text`, neither their number nor their colour shown;
        `dimmed` cells dim, their number followed by `·` (keys the indexer dropped)."""
        self.dimmed = dimmed if dimmed is not None and dimmed.any() else None
        self.array = np.asarray(array)
        self.fractions = fractions  # as asked: a change (the f key) redraws even the same array
        self.hidden, self.hide_text = hidden, hide_text
        self.row_labels, self.col_labels = row_labels, col_labels
        self.scale = scale_for(self.array, fractions, tol)
        self._label_w = min(MAX_LABEL, max((len(s) for s in row_labels), default=1)) + 1
        self._cell_w = max(self.scale.width + (self.dimmed is not None),
                           min(MAX_LABEL - 2, max((len(s) for s in col_labels), default=1))) + 1
        rows, cols = self.array.shape
        before = (self.virtual_size, self._title_w)
        self.virtual_size = Size(self._label_w + cols * self.cell_width, rows + 1)
        self.full_title = title
        self._clip_title()
        self._title_w = min(len(title) + 6, 30)
        self.styles.min_width = self._title_w  # room for the title on the border
        if cursor is not None:
            self.cursor = cursor
        self._light(lit)
        # the screen is laid out again only when this panel's size changed (a re-layout redraws all)
        resized = before != (self.virtual_size, self._title_w)
        self._redraw(layout=resized)
        if resized:   # where the new size is known
            self.call_after_refresh(self._reveal_and_mark)
        else:         # now, so that the panel is drawn once, not again for its scroll or border
            self._reveal_and_mark()

    def _reveal_and_mark(self) -> None:
        self.reveal(*(self.cursor if self.has_cursor else self._first_lit()))
        self._mark_more()

    def release(self) -> None:
        """Forgets the array (a hidden panel must not keep a closed scenario's memory alive)."""
        if self.array.size:
            self.array, self.hidden, self.lit = np.zeros((0, 0)), None, set()
            self.scale = Scale(self.array, True)
            self._lines.clear()

    def set_lit(self, cells) -> None:
        self._light(cells)
        self._redraw()

    def _light(self, cells) -> None:
        self.lit = set(cells)
        self._lit_rows = {}
        for r, c in self.lit:
            self._lit_rows.setdefault(r, set()).add(c)
        self._lit_cols = {c for _, c in self.lit}

    def natural(self, tight: bool = False) -> Size:
        """The panel's outer size with nothing cut: labels, every cell, the border, the title; or
        `tight`, of the title only the step's name (before " · "), the rest cut with …."""
        width, height = self.virtual_size
        title = min(self._title_w, len(self.full_title.split(" · ")[0]) + 7) if tight else self._title_w
        return Size(max(width + 2, title), height + 2)

    @property
    def cell_width(self) -> int:
        return self._cell_w

    def set_hidden(self, hidden: np.ndarray | None) -> None:
        self.hidden = hidden
        self._redraw()

    def is_hidden(self, row: int, col: int) -> bool:
        return self.hidden is not None and bool(self.hidden[row, col])

    def is_dimmed(self, row: int, col: int) -> bool:
        return self.dimmed is not None and bool(self.dimmed[row, col])

    def cell_text(self, row: int, col: int) -> str:
        """What the cell shows (as drawn, without padding)."""
        if self.is_hidden(row, col):
            return self.hide_text
        return self.scale.text(self.array[row, col]) + ("·" if self.is_dimmed(row, col) else "")

    # ------------------------------------------------------------ the cursor
    def move_to(self, row: int, col: int) -> None:
        rows, cols = self.array.shape
        if not rows or not cols:
            return
        row, col = min(max(row, 0), rows - 1), min(max(col, 0), cols - 1)
        old, self.cursor = self.cursor, (row, col)
        self.reveal(row, col)  # a scroll repaints everything; otherwise only what changed:
        self.refresh(Region(0, 0, self.size.width, 1))  # the column labels
        for r in {old[0], row}:
            self.refresh_line(r + 1)
        if old != self.cursor:
            self.post_message(self.CursorMoved(self, row, col))

    def action_move(self, dr: int, dc: int) -> None:
        self.move_to(self.cursor[0] + dr, self.cursor[1] + dc)

    def action_page(self, direction: int) -> None:
        self.move_to(self.cursor[0] + direction * self._view()[1], self.cursor[1])

    def action_edge(self, direction: int) -> None:
        self.move_to(self.cursor[0], 0 if direction < 0 else self.array.shape[1] - 1)

    def on_click(self, event) -> None:
        offset = event.get_content_offset(self)  # None on the border or a scrollbar
        if not self.has_cursor or offset is None or offset.y < 1 or offset.x < self._label_w:
            return
        x, y = self.scroll_offset
        self.move_to(offset.y - 1 + y, (offset.x - self._label_w + x) // self.cell_width)

    # ------------------------------------------------------------ drawing
    def _border(self, name: str, text: str) -> None:
        """Sets a border's text only when it changed: Textual draws the whole panel again whenever
        one is set, even to the same text (and its getter gives markup back, not the text set)."""
        if self._borders.get(name) != text:
            self._borders[name] = text
            setattr(self, name, text)

    def _redraw(self, layout: bool = False) -> None:
        """What is drawn changed: every line is drawn anew (not a title's change, nor a scroll)."""
        self._lines.clear()
        self._padded.clear()
        self.refresh(layout=layout)

    def render_line(self, y: int) -> Strip:
        full = self.scrollable_content_region.width   # once a line: Textual works it out anew each time
        key = (y, self.scroll_offset, full, self.cursor)
        strip = self._lines.get(key)
        if strip is None:
            if len(self._lines) > 4 * max(1, self.size.height):
                self._lines.clear()
            strip = self._lines[key] = self._render_line(y, full)
        return strip

    def _render_line(self, y: int, full: int) -> Strip:
        width = self._data_width(full)
        rows, cols = self.array.shape
        sx, sy = self.scroll_offset
        cw = self.cell_width
        first = sx // cw
        last = min(cols, (sx + width) // cw + 1)
        cur_r, cur_c = self.cursor if self.has_cursor else (-1, -1)
        if y == 0:  # column labels
            corner = [Segment(" " * self._label_w)]
            cells = [(_fit(self.col_labels[c], cw - 1).rjust(cw),
                      LABEL_AT if c == cur_c else LABEL_LIT if c in self._lit_cols else LABEL)
                     for c in range(first, last)]
        else:
            r = sy + y - 1
            if r >= rows:
                return Strip.blank(full)
            name = _fit(self.row_labels[r], MAX_LABEL).strip().ljust(self._label_w - 1) + " "
            corner = [Segment(name, LABEL_AT if r == cur_r else LABEL_LIT if r in self._lit_rows else LABEL)]
            # the row's visible cells as Python values at once: a NumPy scalar per cell costs more
            # than the cell's text (a large matrix draws a few hundred cells a step)
            values = self.array[r, first:last].tolist()
            hidden = self.hidden[r, first:last].tolist() if self.hidden is not None else None
            dim = self.dimmed[r, first:last].tolist() if self.dimmed is not None else None
            lit = self._lit_rows.get(r, ())
            scale, padded = self.scale, self._padded
            cells = []
            for n, value in enumerate(values):
                c = first + n
                blank = hidden is not None and hidden[n]
                if blank or (dim is not None and dim[n]):
                    text = _fit(self.hide_text if blank else scale.text(value) + "·", cw - 1).rjust(cw)
                    style = HIDDEN if blank else DIMMED
                else:
                    text = padded.get(value)
                    if text is None:
                        text = _fit(scale.text(value), cw - 1).rjust(cw)
                        if value == value:   # a NaN is never found again: not kept
                            padded[value] = text
                    style = scale.style(value)
                cells.append((text, CURSOR if r == cur_r and c == cur_c else LIT if c in lit else style))
        return Strip(corner + _visible(cells, first * cw - sx, cw, width)).adjust_cell_length(full)


def _fit(text: str, width: int) -> str:
    """text right-aligned in width, or cut with a visible … when it is longer."""
    return text.rjust(width) if len(text) <= width else text[:width - 1] + "…"


def _visible(cells: list[tuple[str, Style]], start: int, cw: int, width: int) -> list[Segment]:
    """The cells within [0, width) of the data area, the first starting at `start`; a cell cut by
    an edge shows … instead of part of its text (0.1305 cut to 0.13 would read as a value)."""
    out = []
    for n, (text, style) in enumerate(cells):
        lo, hi = start + n * cw, start + (n + 1) * cw
        seen = min(hi, width) - max(lo, 0)
        if seen <= 0:
            continue
        out.append(Segment(text if seen == cw else "…".rjust(seen), style))
    return out
