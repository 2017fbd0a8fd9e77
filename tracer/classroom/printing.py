"""A student's worksheet as printed pages (PDF): the head's matrices laid out as the classroom
sheet (tracer.figures.worksheet's panels), flowing from page to page, under a header with the
student's id, the lesson and the arithmetic. Pages are 8.27 × 11 in: whole on A4 and on Letter."""
from __future__ import annotations

import functools
import textwrap
from dataclasses import dataclass

from ..export import arithmetic_words, given_words, worksheet_words
from ..figures import common
from ..figures.worksheet import CHAR_W, PAD, Panel, draw_panel, make_panel, pairs
from ..given_inputs import display_name, given

PAGE_W, PAGE_H = 8.26, 11.0   # within A4 (8.27 in wide) and Letter (11 in high): either paper holds it whole
MARGIN = 0.5                  # inches; printers leave about a quarter inch unprinted
GAP = 0.3                     # between two matrices side by side
SIZES = {"id": 15, "title": 10.5, "lesson": 8.5, "small": 8}   # points
LINE = 1.45 / 72              # inches of a line per point of its size
METADATA = {"Creator": "attnsim class make", "Producer": "attnsim", "CreationDate": None}


@dataclass
class Block:
    """A product and the matrix that multiplies it, drawn together; its size in inches (unscaled)."""
    main: Panel
    factor: Panel | None
    columns: bool
    head: object = None

    def _names(self) -> list:
        panel = (self.factor if self.columns and self.factor else self.main)
        return (panel.row_names or (self.main.row_names if self.columns else None)) or []

    def label_w(self) -> float:
        names = self._names()
        return max(map(len, names)) * CHAR_W + 0.15 if names else 0.0

    def size(self, cw: float) -> tuple[float, float]:
        m, f = self.main, self.factor
        if f is None:
            return self.label_w() + m.reach(cw), m.height()
        if self.columns:   # the factor at the left, as W_Q·X is written
            return self.label_w() + f.reach(cw) + PAD + m.reach(cw), max(m.height(), f.height())
        return self.label_w() + max(m.reach(cw), f.reach(cw)), f.height() + PAD + m.height()

    def draw(self, ax, x: float, y: float, cw: float) -> None:
        x += self.label_w()
        names = self._names() or None
        m, f = self.main, self.factor
        if f is None:
            draw_panel(ax, x, y, m, cw, names)
        elif self.columns:
            draw_panel(ax, x, y, f, cw, names)
            draw_panel(ax, x + f.reach(cw) + PAD, y, m, cw, None)
        else:
            draw_panel(ax, x, y, f, cw, None)
            draw_panel(ax, x, y + f.height() + PAD, m, cw, names)


def blocks(trace, blank: bool) -> list[Block]:
    """The biases (the figure's formulas name them; a sheet must give their numbers), then every
    step in computation order with its factor."""
    out = [Block(make_panel(trace, f"{display_name(trace, name)} (given)", a, axes, True, blank), None,
                 trace.columns) for name, axes, a in given(trace) if name.startswith("weights.b")]
    steps = list(trace.steps)
    for step, (main, factor) in zip(steps, pairs(trace, steps, blank)):
        out.append(Block(main, factor, trace.columns, step.head))
    return out


def cell_width(trace, filled: list[Block]) -> float:
    """One cell width for a student's sheet and its key (from the key's longest number), so that
    the key lies exactly over the sheet; room for a hand-written fraction at least."""
    longest = max((len(t) for b in filled for p in (b.main, b.factor) if p for row in p.cells for t in row), default=1)
    return max(0.42, CHAR_W * max(longest, 5) + 0.16)


@dataclass
class Header:
    """What the top of a student's first page says: lines of (text, size, bold)."""
    lines: list

    @property
    def height(self) -> float:
        return sum(size * LINE for _, size, _ in self.lines) + 0.15


def header(trace, student: str, key: bool) -> Header:
    sc = trace.scenario
    width = PAGE_W - 2 * MARGIN
    lines = [(f"Answer key: {student}" if key else student, SIZES["id"], True)]
    title = (sc.title or sc.name).removesuffix(f" ({student})")   # the id stands above it
    lines += [(t, SIZES["title"], True) for t in _wrap(title, SIZES["title"], width)]
    if not key and sc.description:
        lines += [(t, SIZES["lesson"], False) for t in _wrap(worksheet_words(sc.description), SIZES["lesson"], width)]
    how = f"Arithmetic ({trace.arithmetic.preset}): {arithmetic_words(trace)}."
    if given_words(trace):
        how += f" Given besides the matrices: {given_words(trace)}."
    if not key:
        how += (" Fill in every empty cell from the ones before it: whole numbers, fractions (27/46), −∞ where "
                "masked.")
    lines += [(t, SIZES["small"], False) for t in _wrap(how, SIZES["small"], width)]
    return Header(lines)


@functools.lru_cache(maxsize=64)   # every student's sheet has the same lesson
def _wrap(text: str, size: float, width: float) -> tuple[str, ...]:
    """Lines that fit `width` inches at `size` points (measured, not guessed)."""
    chars = int(width / (size / 72 * 0.5))
    while True:
        lines = tuple(textwrap.wrap(" ".join(text.split()), chars)) or ("",)
        if chars <= 20 or all(common.text_width(line, size) <= width for line in lines):
            return lines
        chars -= 4


def paginate(items: list[Block], cw: float, first: float) -> tuple[float, list[list[tuple]]]:
    """The scale (≤ 1: the widest block fits the width, the tallest a page) and each page's (block,
    x, y), in unscaled inches from the top left of the body; blocks flow left to right, a new head on
    a new line, a new page when the next would not fit whole."""
    width = PAGE_W - 2 * MARGIN
    later = SIZES["small"] * LINE + 0.15   # the header of a page after the first: one line
    sizes = [b.size(cw) for b in items]
    scale = min(1.0, width / max(w for w, _ in sizes), (PAGE_H - 2 * MARGIN - later) / max(h for _, h in sizes))

    def room(page: int) -> float:
        return (PAGE_H - 2 * MARGIN - (first if page == 0 else later)) / scale

    pages, x, y, line_h, head = [[]], 0.0, 0.0, 0.0, items[0].head
    for b, (w, h) in zip(items, sizes):
        if x > 0 and (x + w > width / scale or b.head != head):
            x, y, line_h = 0.0, y + line_h + PAD, 0.0
        if y + h > room(len(pages) - 1) and (pages[-1] or len(pages) == 1):   # (the first page's header is tall)
            pages.append([])
            x, y, line_h = 0.0, 0.0, 0.0
        pages[-1].append((b, x, y))
        x, line_h, head = x + w + GAP, max(line_h, h), b.head
    return scale, pages


class Canvas:
    """What draw_panel draws on: grids and words placed straight on the page's figure, in inches
    from a corner of the body, shrunk by `scale`. The words of a page are one artist (Words)."""

    def __init__(self, fig, left: float, top: float, scale: float = 1.0) -> None:
        from matplotlib.transforms import Affine2D
        self.fig, self.scale = fig, scale
        self.transform = Affine2D().scale(scale, -scale).translate(left, PAGE_H - top) + fig.dpi_scale_trans
        self.words = Words(self.transform)
        fig.add_artist(self.words)

    def text(self, x: float, y: float, s: str, fontsize: float, weight: str = "normal", color: str = "black",
             ha: str = "left", va: str = "baseline") -> None:
        self.words.items.append((x, y, s, fontsize * self.scale, weight, color, ha, va))

    def add_collection(self, grid, autolim: bool = False) -> None:
        grid.set_transform(self.transform)
        grid.set_linewidth(grid.get_linewidth() * self.scale)
        grid.set_zorder(1)
        self.fig.add_artist(grid)


def _words_class():
    from matplotlib.artist import Artist
    from matplotlib.font_manager import FontProperties

    class Words(Artist):
        """Many short texts drawn by one artist: a page's hundreds of numbers cost the renderer's
        text calls only (a matplotlib Text apiece took most of a class's time). Each text is placed
        as Text would place it: by its width, and by the font's ascent and descent."""
        zorder = 3

        def __init__(self, transform) -> None:
            super().__init__()
            self.set_transform(transform)
            self.items: list[tuple] = []

        def draw(self, renderer) -> None:
            inks = {}
            to_display = self.get_transform()
            flip = renderer.get_canvas_width_height()[1] if renderer.flipy() else None   # Agg counts y down
            for x, y, s, size, weight, color, ha, va in self.items:
                prop = _font(size, weight)
                w = _metrics(renderer, s, prop)[0]
                _, h, d = _metrics(renderer, "lp", prop)   # a line's height, as Text aligns it
                px, py = to_display.transform((x, y))
                px -= {"left": 0.0, "center": w / 2, "right": w}[ha]
                py += {"baseline": 0.0, "bottom": d, "center": d - h / 2, "top": d - h}[va]
                gc = inks.get(color)
                if gc is None:
                    gc = inks[color] = renderer.new_gc()
                    gc.set_foreground(color)
                renderer.draw_text(gc, px, flip - py if flip is not None else py, s, prop, 0.0)
            for gc in inks.values():
                gc.restore()

    @functools.lru_cache(maxsize=32)
    def _font(size: float, weight: str):
        return FontProperties(family=common.RC["font.family"], size=size, weight=weight)

    def _metrics(renderer, s: str, prop, _cache={}):   # noqa: B006  (a cache: every page shares it)
        key = (renderer.points_to_pixels(72.0), s, prop.get_size_in_points(), prop.get_weight())
        got = _cache.get(key)
        if got is None:
            got = _cache[key] = renderer.get_text_width_height_descent(s, prop, ismath=False)
        return got

    return Words


def Words(transform):   # noqa: N802  (matplotlib is imported only when a sheet is printed)
    global Words
    Words = _words_class()
    return Words(transform)


def pages(trace, student: str, blank: bool, cw: float, items: list[Block]):
    """Figures, one per page, of this student's sheet (blank) or key."""
    from matplotlib.figure import Figure
    top = header(trace, student, key=not blank)
    scale, laid = paginate(items, cw, top.height)
    for n, placed in enumerate(laid):
        fig = Figure(figsize=(PAGE_W, PAGE_H))
        page = Canvas(fig, 0.0, 0.0)
        y = MARGIN
        lines = top.lines if n == 0 else [(f"{student}: {trace.scenario.title or trace.scenario.name}",
                                           SIZES["small"], True)]
        for text, size, bold in lines:
            page.text(MARGIN, y, text, size, weight="bold" if bold else "normal", va="top")
            y += size * LINE
        page.text(PAGE_W - MARGIN, MARGIN, f"{student} · page {n + 1} of {len(laid)}", SIZES["small"],
                  ha="right", va="top", color="#555555")
        if n == 0 and blank:
            page.text(PAGE_W - MARGIN, MARGIN + 0.3, "name: ______________________", SIZES["title"],
                      ha="right", va="top")
        body = Canvas(fig, MARGIN, y + 0.15, scale)
        for b, bx, by in placed:
            b.draw(body, bx, by, cw)
        yield fig


def sheet(trace, student: str, blank: bool):
    """The pages of a student's sheet (blank) or of its key: the same layout, cell for cell."""
    filled = blocks(trace, False)
    cw = cell_width(trace, filled)
    yield from pages(trace, student, blank, cw, blocks(trace, True) if blank else filled)


def write_pdf(path, sheets) -> None:
    """Writes the pages of `sheets` (an iterable of figures) as one PDF, its dates and ids fixed so
    that the same sheets give the same bytes."""
    mpl = common.matplotlib()
    from matplotlib.backends.backend_pdf import PdfPages
    with mpl.rc_context(common.RC), PdfPages(path, metadata=METADATA) as pdf:
        for fig in sheets:
            pdf.savefig(fig, facecolor="white")
