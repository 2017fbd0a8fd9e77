"""The pipeline as a list, x → q, k, v → scores → … → out, with the current step marked;
one head at a time (the shared steps and that head's own), so 96 heads stay readable."""
from __future__ import annotations

from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

MIN_WIDTH, MAX_WIDTH = 13, 22   # characters of a line: "▶ h0.weights", and at most what a narrow screen spares
TITLE, HINT, HERE, HEAD, MORE = (Style.parse(s) for s in ("bold", "dim", "bold reverse", "cyan", "dim"))
SHARED = Style()


class StepList(Widget):
    """Click a step to go there; the screen moves the marker with `n` / `p`. Drawn line by line:
    a step redraws the lines whose text or style changed (the marker's two), not the whole list."""

    @dataclass
    class Chosen(Message):
        step_id: str

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.ids: list[str] = []
        self._top = 0    # lines above the first step
        self._lines: list[str | None] = []   # the step id on each listed line (None: a "more" line)
        self._drawn: list[tuple[str, Style]] = []   # each line's text and style

    def show(self, steps, current: str, head: int, heads: int) -> None:
        drawn = []
        self._top = 0
        if heads > 1:
            drawn += [(f"head {head} (0–{heads - 1})", TITLE), ("[ ] switch", HINT)]
            self._top = 2
        self.ids = [s.id for s in steps]
        # as wide as the longest id (h0.blk0.rescale), within bounds: a wrapped id reads as two steps
        width = min(MAX_WIDTH, max([MIN_WIDTH] + [len(i) + 2 for i in self.ids]))
        self.styles.width = width + 2   # the padding and the border
        self._lines = []
        for step in self._window(steps, current):
            if isinstance(step, str):   # a "more" line: the list is longer than the panel
                drawn.append((step.ljust(width), MORE))
                self._lines.append(None)
            else:
                here = step.id == current
                line = f"{'▶' if here else ' '} {step.id}"
                line = (line if len(line) <= width else line[:width - 1] + "…").ljust(width)
                drawn.append((line, HERE if here else SHARED if step.head is None else HEAD))
                self._lines.append(step.id)
        old, self._drawn = self._drawn, drawn
        for y in range(max(len(old), len(drawn))):
            if y >= len(old) or y >= len(drawn) or old[y] != drawn[y]:
                self.refresh(Region(0, y, self.size.width, 1))

    def render_line(self, y: int) -> Strip:
        text, style = self._drawn[y] if y < len(self._drawn) else ("", SHARED)
        base = self.rich_style   # the panel's colours, under the line's own
        return Strip([Segment(text, base + style)]).adjust_cell_length(self.scrollable_content_region.width, base)

    def render(self) -> Text:
        """The whole list as text (what the lines draw)."""
        return Text("\n").join(Text(text, style) for text, style in self._drawn)

    def _window(self, steps, current: str) -> list:
        """The steps that fit the panel's height, around the current one, with a line saying how
        many more there are above or below (a long pipeline, e.g. online blocks, stays navigable)."""
        rows = self.content_size.height - self._top
        if rows <= 0 or len(steps) <= rows:
            return list(steps)
        rows, total = max(rows, 3), len(steps)
        at = next((i for i, s in enumerate(steps) if s.id == current), 0)

        def end_of(start: int) -> int:   # a "more" line above when start > 0, below when cut
            end = min(total, start + rows - (1 if start else 0))
            return end if end == total else end - 1
        start = max(0, at - (rows - 2) // 2)
        end = end_of(start)
        if end == total:   # the tail fits: fill the panel from the bottom
            start = max(0, total - (rows - 1))
        while at >= end_of(start):
            start += 1
        end = end_of(start)
        shown = list(steps[start:end])
        if start:
            shown.insert(0, f"↑ {start} more")
        if end < len(steps):
            shown.append(f"↓ {len(steps) - end} more")
        return shown

    def on_click(self, event) -> None:
        index = event.y - self._top - self.styles.gutter.top
        if 0 <= index < len(self._lines) and self._lines[index] is not None:
            self.post_message(self.Chosen(self._lines[index]))
