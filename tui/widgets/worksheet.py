"""The worksheet: every matrix of one head on one scrollable sheet, laid out as on paper (each
weight beside the result it makes, under or beside the input it multiplies), blanks still to fill."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from textual.containers import Horizontal, ScrollableContainer, Vertical
from textual.geometry import Region
from textual.message import Message
from textual.widgets import Static

from tracer.given_inputs import factor

from ..session import axis_labels, head_steps, step_labels
from .matrix import ROOM, MatrixView

MAX_WIDTH, MAX_HEIGHT = 60, 24   # a panel's largest size on the sheet; larger matrices scroll inside


@dataclass
class Sheet:
    """What the sheet shows of a trace: one entry per panel, in the order a student writes them."""
    projections: list[str]               # the steps a given weight makes: W_Q makes h0.q, W_DKV c_kv
    attention: list[list[str]]           # per-head steps after the projections; a column of ids stacks
    layer: list[str]                     # layer-wide steps after the heads (concat, out, …)


def plan(trace, head: int) -> Sheet:
    steps = [s for s in head_steps(trace, head) if s.id != "x"]   # X has its own place
    projections = [s.id for s in steps if s.kind != "out" and factor(trace, s) is not None]
    used = set(projections)
    read = {i for s in steps if s.head is not None or s.group is not None for i in s.inputs}
    attention: list[list[str]] = []
    for s in steps:   # the head's own steps, its group's keys, and what they read (θ, the context)
        if s.id in used or (s.head is None and s.group is None and s.id not in read):
            continue
        if s.kind == "sums" and trace.columns and attention:  # column sums go under the powers
            attention[-1].append(s.id)
        else:
            attention.append([s.id])
    drawn = used | {sid for group in attention for sid in group}
    return Sheet(projections, attention, [s.id for s in steps if s.id not in drawn])


def panel_id(step_id: str) -> str:
    return "ws-" + step_id.replace(".", "-")


class Worksheet(ScrollableContainer):
    """Scrolls both ways when the terminal is smaller than the sheet; nothing is cut."""

    @dataclass
    class Picked(Message):
        """A panel of the sheet took the focus: its step becomes the current one."""
        step_id: str

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.key: tuple | None = None     # (trace, head) the panels were built for
        self.height_needed = 0            # the sheet's rows with every panel whole
        self.views: dict[str, MatrixView] = {}

    def release(self) -> None:
        """Drops the panels of the trace they were built for (its arrays with them)."""
        self.key, self.views = None, {}
        self.remove_children()

    def build(self, trace, head: int, current: str, masks: dict, fractions: bool, tol: float, cell) -> None:
        """Mounts the panels of one head, filled (anew only when the trace or the head changed;
        the bands are laid out by the sizes their panels have when mounted, so they are filled first)."""
        if self.key == (id(trace), head):
            self.fill(trace, current, masks, fractions, tol, cell)
            return
        self.key = (id(trace), head)
        self.remove_children()
        self.views = {}
        sheet = plan(trace, head)
        weights = [self._weight(trace, trace.step(sid)) for sid in sheet.projections]
        results = [self._view(sid) for sid in sheet.projections]
        x = self._view("x")
        attention = [[self._view(sid) for sid in group] for group in sheet.attention]
        layer = [self._view(sid) for sid in sheet.layer] if not trace.lazy else []  # a lazy trace: every head
        self.fill(trace, current, masks, fractions, tol, cell)  # sizes known before the bands are laid out
        if trace.columns:  # Q = W_Q·X: X above, each W to the left of what it makes (same rows)
            corner = _blank(x.styles.height.value, max((w.styles.width.value for w in weights), default=1))
            columns_parts = [[corner, *weights], [x, *results]]
        else:              # Q = X·W_Q: each W above what it makes (same columns), X to the left
            top = max((w.styles.height.value for w in weights), default=1)
            for w in weights:
                w.styles.height = top
            columns_parts = [[_blank(top, x.styles.width.value), x]] + [[w, r] for w, r in zip(weights, results)]
        columns = [Vertical(*stack, classes="ws-stack") for stack in columns_parts]
        bands_parts = [columns_parts, attention, [[v] for v in layer]]
        self.height_needed = sum(max(map(_tall, band), default=0) for band in bands_parts)
        bands = [Horizontal(*columns, classes="ws-band"),
                 Horizontal(*[Vertical(*group, classes="ws-stack") for group in attention], classes="ws-band")]
        if layer:
            bands.append(Horizontal(*layer, classes="ws-band"))
        self.mount_all(bands)

    def _view(self, step_id: str) -> MatrixView:
        view = MatrixView(cursor=True, id=panel_id(step_id), classes="ws-step")
        self.views[step_id] = view
        return view

    def _weight(self, trace, step) -> MatrixView:
        name, w = factor(trace, step)
        view = MatrixView(classes="ws-weight")
        axes = ("out", "in") if trace.columns else ("in", "out")
        view.show(w, axis_labels(trace, axes[0], w.shape[0], width=ROOM[0]),
                  axis_labels(trace, axes[1], w.shape[1], width=ROOM[1]), title=name)
        _fit(view)
        return view

    def fill(self, trace, current: str, masks: dict, fractions: bool, tol: float, cell) -> None:
        """Draws every panel: `masks[step]` is None (shown) or the cells to leave blank / ask."""
        for sid, view in self.views.items():
            step = trace.step(sid)
            hidden, hide_text = masks.get(sid, (None, "?"))
            view.show(trace[sid], *step_labels(trace, step, ROOM), title=sid, fractions=fractions, tol=tol,
                      cursor=cell if sid == current else None, hidden=hidden, hide_text=hide_text)
            _fit(view)
        view = self.views.get(current)
        if view is not None and not view.has_focus and self.display:
            self.call_after_refresh(view.focus)

    def on_descendant_focus(self, event) -> None:
        for sid, view in self.views.items():
            if view is event.widget:
                self.post_message(self.Picked(sid))
                self.follow(view)

    def on_matrix_view_cursor_moved(self, message: MatrixView.CursorMoved) -> None:
        self.follow(message.view)   # not stopped: the main screen shows the cell's story

    def follow(self, view: MatrixView) -> None:
        """Scrolls the sheet (after the panel has scrolled inside) so the cursor's cell is in sight,
        with its panel's title and row labels too when the sheet has the room."""
        def scroll() -> None:
            box, row, col = view.region, *view.cursor
            if not box.size or not self.size:
                return
            x, y = view.scroll_offset
            cell = Region(box.x + 1 + view._label_w + col * view.cell_width - x, box.y + 2 + row - y,
                          view.cell_width, 1)
            width, height = self.scrollable_content_region.size
            left = box.x if cell.right - box.x <= width else cell.x
            top = box.y if cell.bottom - box.y <= height else cell.y
            seen = Region(left, top, cell.right - left, cell.bottom - top)
            self.scroll_to_region(seen.translate(self.scroll_offset - self.scrollable_content_region.offset),
                                  animate=False, immediate=True, force=True)
        self.call_after_refresh(scroll)


def _tall(stack) -> int:
    """The height of a column of panels, one above the other (as sized before they are laid out)."""
    return sum(int(w.styles.height.value) for w in stack)


def _blank(height: int, width: int) -> Static:
    corner = Static("", classes="ws-blank")
    corner.styles.height, corner.styles.width = height, width
    return corner


def _fit(view: MatrixView) -> None:
    """Sizes a panel to its matrix plus border, up to MAX; a larger matrix scrolls inside it
    (the scrollbar of one axis takes a line or column of the other)."""
    width, height = view.virtual_size.width, view.virtual_size.height
    wide, tall = width + 2 > MAX_WIDTH, height + 2 > MAX_HEIGHT
    view.styles.width = min(MAX_WIDTH, max(width + 2 + tall, view.styles.min_width.value if view.styles.min_width else 0))
    view.styles.height = min(MAX_HEIGHT, height + 2 + wide)


def blanks(trace, head: int, current: str) -> dict[str, tuple[np.ndarray, str]]:
    """The steps a pencil has not reached yet (after the current one): all cells blank."""
    ids = [s.id for s in head_steps(trace, head)]
    after = ids[ids.index(current) + 1:] if current in ids else []
    return {sid: (np.ones(trace.step(sid).shape, bool), " ") for sid in after}
