"""A small heatmap of one head's attention weights, two matrix rows per text line (▀ half blocks),
the matrix shrunk by block maxima so that a sharp pattern survives at any size."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from rich.color import Color
from rich.style import Style
from rich.text import Text
from textual.message import Message
from textual.widgets import Static

from tracer.model_view import tiles

WIDTH, HEIGHT = 16, 16            # cells drawn at most: 16 × 8 characters
LOW, HIGH, NEGATIVE = (38, 44, 58), (230, 135, 20), (40, 120, 230)


def shrink(a: np.ndarray, rows: int = HEIGHT, cols: int = WIDTH) -> np.ndarray:
    """Block maxima of a (finite values only), at most rows × cols."""
    return tiles.shrink(a, rows, cols)


def _colour(t: float) -> Color:
    t = min(max(t, 0.0), 1.0) if math.isfinite(t) else 0.0
    return Color.from_rgb(*(round(a + (b - a) * t) for a, b in zip(LOW, HIGH)))


def _diverging(t: float) -> Color:
    """−1 … 1: blue below 0, the usual ramp above (a negative weight shows)."""
    if not math.isfinite(t) or t >= 0:
        return _colour(t)
    t = min(-t, 1.0)
    return Color.from_rgb(*(round(a + (b - a) * t) for a, b in zip(LOW, NEGATIVE)))


class MiniHeat(Static, can_focus=True):
    """One head's tile; Enter (or a click) posts Chosen with its head."""

    @dataclass
    class Chosen(Message):
        head: int

    def __init__(self, head: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.head = head
        self.border_title = f"head {head}"

    def draw(self, weights: np.ndarray, axes: tuple[str, str] = ("query", "key"), dropped: np.ndarray | None = None,
             note: str = "") -> None:
        """The weights, their axes named under the tile: `↓ query · key →` (rows down, columns across);
        `dropped` cells (keys a lightning indexer dropped) drawn as the background, not as a weight of 0,
        where a whole block of them is; `note` after the axes (`top-2`)."""
        self.border_subtitle = f"↓ {axes[0]} · {axes[1]} →" + (f" {note}" if note else "")
        small = shrink(weights)
        if small.size and np.nanmin(small) < 0:   # a linear layer's implicit weights: diverging around 0
            top = np.nanmax(np.abs(small))
            self.paint(small / top, _diverging)
            return
        top = small.max() if small.size else 0.0
        small = small / top if top > 0 else small
        if dropped is not None:   # a block's largest "kept" is 0 where every cell of it was dropped
            small = np.where(shrink((~dropped).astype(np.float64)) > 0, small, np.nan)
        self.paint(small)

    def paint(self, scaled: np.ndarray, colour=None) -> None:
        """Values as half blocks, two rows a line, each cell coloured by colour(value) (default: the
        dark-to-orange ramp of [0, 1])."""
        colour = colour or _colour
        if scaled.shape[0] % 2:  # an odd last row pairs with the background
            scaled = np.vstack([scaled, np.full((1, scaled.shape[1]), np.nan)])
        text = Text()
        for r in range(0, scaled.shape[0], 2):
            for c in range(scaled.shape[1]):
                upper, lower = scaled[r, c], scaled[r + 1, c]
                if math.isnan(upper):   # the background above: the lower half, or nothing
                    text.append(" " if math.isnan(lower) else "▄", Style(color=None if math.isnan(lower)
                                                                            else colour(lower)))
                    continue
                bg = None if math.isnan(lower) else colour(lower)
                text.append("▀", Style(color=colour(upper), bgcolor=bg))
            text.append("\n" if r + 2 < scaled.shape[0] else "")
        self.update(text)

    def key_enter(self) -> None:
        self.post_message(self.Chosen(self.head))

    def on_click(self) -> None:
        self.post_message(self.Chosen(self.head))
