"""What a matrix panel shows of a matrix larger than itself: where it is scrolled to, its scrollbars,
and on its bottom border how much lies out of sight. Mixed into MatrixView, whose cells, cursor and
borders these read."""
from __future__ import annotations

from textual.geometry import Size

from .fit import clip


class Scrolling:
    """MatrixView's scrolling: `settle` readies it for a size before Textual gives it (layout.fit)."""

    def settle(self, size: Size) -> None:
        """Readies the panel for the outer `size` it is about to be given (layout.fit): its
        scrollbars, its title cut to fit, and the bottom border's count of what lies out of sight.
        Left until Textual has resized it, each would draw the panel again and scrollbars that come
        or go would lay the whole screen out again: a frame or two more per step of a large matrix."""
        inner = size - self.styles.gutter.totals
        width, height = self.virtual_size
        across, down = width > inner.width, height > inner.height
        across = across or down and width > inner.width - self.styles.scrollbar_size_vertical
        down = down or across and height > inner.height - self.styles.scrollbar_size_horizontal
        self.styles.overflow_x, self.styles.overflow_y = ("scroll" if across else "hidden"), ("scroll" if down else "hidden")
        self.show_horizontal_scrollbar, self.show_vertical_scrollbar = across, down
        if self._horizontal_scrollbar is not None or across:
            self.horizontal_scrollbar.display = across
        if self._vertical_scrollbar is not None or down:
            self.vertical_scrollbar.display = down
        self._clip_title(inner.width)
        view = self._view(size)
        self._mark_more(view, self._revealed(*(self.cursor if self.has_cursor else self._first_lit()), view))

    def _scroll_update(self, virtual_size: Size) -> None:
        """Textual calls this at every layout of the screen, for every scrollable widget, and draws
        its scrollbars again each time even when nothing changed (a step of a large matrix: two
        layouts, scrollbars drawn three times): here, only when a size or an overflow did."""
        key = (virtual_size, self.container_size, self.styles.overflow_x, self.styles.overflow_y)
        if key != self._scrolled_for:
            self._scrolled_for = key
            super()._scroll_update(virtual_size)

    def _view(self, size: Size | None = None) -> tuple[int, int]:
        """Data columns (in characters) and data rows that fit in the widget, or in the outer `size`
        it is about to get (its scrollbars settled for it)."""
        if size is None:
            width, height = self.scrollable_content_region.size
        else:
            inner = size - self.styles.gutter.totals
            width = inner.width - self.show_vertical_scrollbar * self.styles.scrollbar_size_vertical
            height = inner.height - self.show_horizontal_scrollbar * self.styles.scrollbar_size_horizontal
        return self._data_width(width), max(1, height - 1)

    def _data_width(self, width: int) -> int:
        """The data area's columns in a content area `width` wide (the row labels take the rest)."""
        return max(1, width - self._label_w)

    def _first_lit(self) -> tuple[int, int]:
        return min(self.lit) if self.lit else (0, 0)

    def reveal(self, row: int, col: int) -> None:
        """Scrolls just enough for (row, col) to be visible."""
        if not self.array.size:
            return
        self.scroll_to(*self._revealed(row, col, self._view()), animate=False, force=True)

    def _revealed(self, row: int, col: int, view: tuple[int, int]) -> tuple[int, int]:
        """The scroll offset that shows (row, col) in a data area of `view`, moved as little as can be."""
        width, height = view
        x, y = (round(v) for v in self.scroll_offset)
        cw = self.cell_width
        if row < y:
            y = row
        elif row >= y + height:
            y = row - height + 1
        if col * cw < x:
            x = col * cw
        elif (col + 1) * cw > x + width:
            x = (col + 1) * cw - width
        rows, cols = self.array.shape
        return max(0, min(x, cols * cw - width)), max(0, min(y, rows - height))   # as Textual clamps a scroll

    def _clip_title(self, width: int | None = None) -> None:
        width = width or self.size.width
        room = width - 4 if width else len(self.full_title)   # the corners and a space each side
        self._border("border_title", clip(self.full_title, room))

    def on_resize(self) -> None:
        self._clip_title()
        self._reveal_and_mark()

    def watch_scroll_x(self, old: float, new: float) -> None:
        super().watch_scroll_x(old, new)
        self._mark_more()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self._mark_more()

    def _mark_more(self, view: tuple[int, int] | None = None, offset: tuple[int, int] | None = None) -> None:
        """Says on the bottom border how many columns and rows lie out of sight, and which way:
        a thin scrollbar alone is easy to miss, and a student must know the matrix goes on. (`view`
        and `offset`: the data area and scroll it is about to have, else those it has.)"""
        rows, cols = self.array.shape
        if not self.array.size or not (view or self.size.width):
            self._border("border_subtitle", "")
            return
        width, height = view or self._view()
        x, y = offset or (round(v) for v in self.scroll_offset)
        cw = self.cell_width
        left, right = -(-x // cw), max(0, cols - (x + width) // cw)
        above, below = y, max(0, rows - y - height)
        marks = [f"◂ {left}" if left else "", f"{right} more ▸" if right else "",
                 f"▴ {above}" if above else "", f"{below} more ▾" if below else ""]
        self._border("border_subtitle", "  ".join(m for m in marks if m))
