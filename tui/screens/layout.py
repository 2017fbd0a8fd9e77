"""The main screen's layout at any terminal size: the current step's panel takes the room it needs,
the panels it reads from share the rest, beside it, in a row, or above it when the screen is narrow."""
from __future__ import annotations

from dataclasses import dataclass, field

from textual.containers import Vertical
from textual.geometry import Size

from ..widgets.cell_info import CellInfo
from ..widgets.state import StatePanel
from ..widgets.matrix import MatrixView

SIDE_MIN = 24    # narrower than this, a column of sources beside the step shows too little: stack instead
SOURCE_MIN = 4   # a source panel's least height: its border, its column labels and one row
INFO_LEAST = 4   # rows kept for the cell's story (what a student reads after the numbers) at the least


@dataclass
class Plan:
    """Where each panel goes. mode: "row" (sources side by side, then the step), "side" (sources in
    a column beside the step) or "stack" (sources side by side above the step, the step full width)."""
    mode: str
    current: Size
    sources: list[Size] = field(default_factory=list)
    height: int = 0   # of the whole matrices area


def share(total: int, wants: list[int], least: int = 1) -> list[int]:
    """Splits `total` among panels that want `wants`: small ones get all they want, the large ones
    share what is left evenly (water filling); none gets less than min(want, least) while
    anything is left, and together they never get more than `total`."""
    out = [0] * len(wants)
    left, order = total, sorted(range(len(wants)), key=lambda n: wants[n])
    for k, n in enumerate(order):
        fair = left // (len(order) - k)
        out[n] = min(left, max(min(wants[n], fair), min(wants[n], least)))
        left -= out[n]
    return out


def arrange(width: int, height: int, current: Size, sources: list[Size], info: int,
            tight: list[Size] | None = None) -> Plan:
    """The plan for a matrices area `width` wide, above an info area wanting `info` rows, in a
    column `height` tall; `current` and `sources` are the panels' sizes with nothing cut, `tight`
    the sources' sizes with only their step's name kept of their titles. The first of row, side,
    stack that shows every panel whole (titles whole if it can); else the step whole, sources cut."""
    reserve = min(info, max(INFO_LEAST, height // 3))   # the cell's story, within a third of the height
    if current.height > height - reserve:   # a step too large to be seen whole anyway: the words keep more
        reserve = max(reserve, height * 2 // 5)
    room = max(SOURCE_MIN, height - reserve)
    if not sources:
        return _fit_current("row", Size(width, room), current, [], 0)
    for sizes in [sources, tight or sources]:
        plans = [_row(width, room, current, sizes), _side(width, room, current, sizes),
                 _stack(width, room, current, sizes)]
        for plan in plans:
            if plan is not None and _whole(plan, current, sizes):
                return plan
    return plans[1] if current.width + SIDE_MIN <= width or current.width > width else plans[2]


def _whole(plan: Plan, current: Size, sources: list[Size]) -> bool:
    return all(got.width >= want.width and got.height >= want.height
               for got, want in zip([plan.current, *plan.sources], [current, *sources]))


def _row(width: int, room: int, current: Size, sources: list[Size]) -> Plan | None:
    """Sources side by side, then the step, all in one row; None when they are not all that narrow."""
    tall = min(room, max(s.height for s in [current, *sources]))
    row = [s.width + (s.height > tall) for s in sources]   # a vertical scrollbar takes a column
    if current.width + sum(row) > width:
        return None
    return _fit_current("row", Size(width - sum(row), tall), current,
                        [Size(w, min(s.height, tall)) for w, s in zip(row, sources)], tall)


def _side(width: int, room: int, current: Size, sources: list[Size]) -> Plan:
    """Sources in a column beside the step: the step whole when it can be, else (a large step)
    half the width for the sources."""
    space = width - current.width if current.width <= width else width // 2
    cut = [s.height + (min(space, s.width) < s.width) for s in sources]   # a horizontal scrollbar takes a row
    tall = min(room, max(sum(cut), current.height))
    rows = share(tall, cut, SOURCE_MIN)
    column = max(1, min(space, max(s.width + (r < h) for s, h, r in zip(sources, cut, rows))))
    return _fit_current("side", Size(width - column, tall), current, [Size(column, r) for r in rows], tall)


def _stack(width: int, room: int, current: Size, sources: list[Size]) -> Plan:
    """The step on its own full-width row, its sources side by side above it."""
    widths = [s.width for s in sources]
    cut = [s.height + (c < s.width) for c, s in zip(share(width, widths, SIDE_MIN // 2), sources)]
    above = min(room - 1, max(min(max(cut), room - current.height), min(max(cut), SOURCE_MIN)))
    cols = share(width, [w + (h > above) for w, h in zip(widths, cut)], SIDE_MIN // 2)
    plan = _fit_current("stack", Size(width, room - above), current, [], 0)
    plan.sources = [Size(c, min(h, above)) for c, h in zip(cols, cut)]
    plan.height = above + plan.current.height
    return plan


def _fit_current(mode: str, box: Size, current: Size, sources: list[Size], height: int) -> Plan:
    """The step's panel in `box`: its own size where it fits, with a row or a column more for a
    scrollbar where the other way is cut."""
    w, h = min(current.width, box.width), min(current.height, box.height)
    w = min(box.width, w + (h < current.height))    # a vertical scrollbar takes a column
    h = min(box.height, h + (w < current.width))    # a horizontal one a row
    return Plan(mode, Size(max(w, 1), max(h, 1)), sources, max(height, h))


class Work(Vertical):
    """The column beside the pipeline. Its own size can change without the screen's (it has none
    while the first trace loads, under a loading indicator): the panels are fitted again then."""

    def on_resize(self) -> None:
        fit = getattr(self.screen, "fit", None)
        if fit is not None:
            self.call_after_refresh(fit)


class FitMixin:
    """Mixed into MainScreen: applies `arrange` to the panels on every step, cell and resize."""

    def on_resize(self) -> None:
        self.call_after_refresh(self.fit)   # after the new size has reached the panels' column

    def on_screen_resume(self) -> None:
        self.call_after_refresh(self.fit)   # the terminal may have been resized under a dialog

    def _fit_sheet(self, height: int) -> None:
        """The worksheet takes the rows it needs when that leaves the cell's story INFO_LEAST rows;
        a sheet that scrolls anyway leaves the story a third of the height."""
        sheet = self.query_one("#sheet")
        need = sheet.height_needed + 1   # and a horizontal scrollbar
        room = height - INFO_LEAST if need <= height - INFO_LEAST else height - max(INFO_LEAST, height // 3)
        sheet.styles.max_height = max(SOURCE_MIN, room)

    def fit(self) -> None:
        """Sizes the panels for this step, this cell's story and this terminal (see `arrange`)."""
        work, matrices = self.query_one("#work"), self.query_one("#matrices")
        if self.trace is not None and self.sheet and work.size.height:
            self._fit_sheet(work.size.height)
        if self.trace is None or self.sheet or not work.size.width:
            return
        current = self.query_one("#current", MatrixView)
        views = [v for v in self.query("#inputs MatrixView").results(MatrixView) if v.display]
        width = work.size.width
        story = self.query_one(CellInfo).get_content_height(work.size, work.size, max(1, width - 3))
        state = self.query_one(StatePanel)
        if state.display:   # a linear layer's state, under the story: room for it too
            story += state.get_content_height(work.size, work.size, max(1, width - 3))
        plan = arrange(width, work.size.height, current.natural(), [v.natural() for v in views], story + 1,
                       [v.natural(tight=True) for v in views])
        # the mode as two styles, not a class of #matrices: a class changed restyles every panel and
        # scrollbar under it (7 ms of a step of a large matrix, as when x's lone panel gains sources)
        matrices.styles.layout = "vertical" if plan.mode == "stack" else "horizontal"
        matrices.styles.height = plan.height
        inputs = self.query_one("#inputs")
        inputs.styles.layout = "vertical" if plan.mode == "side" else "horizontal"
        if plan.mode == "side":
            inputs.styles.width, inputs.styles.height = plan.sources[0].width if views else 0, plan.height
        else:
            inputs.styles.width = sum(s.width for s in plan.sources)
            inputs.styles.height = max((s.height for s in plan.sources), default=0)
        for view, size in zip(views + [current], plan.sources + [plan.current]):
            # the plan's size exactly: a title longer than the panel is cut with … (else panels overlap)
            view.styles.min_width = 0
            view.styles.width, view.styles.height = size.width, size.height
            view.settle(size)
