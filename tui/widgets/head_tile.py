"""One head's tile in the model view: its matrix as a mini heatmap 10 cells wide (a signed matrix,
a linear layer's implicit one, blue–white–red around 0), `h3` on its border and a role score
under it; Enter or a click posts Picked with its layer and head."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from rich.color import Color
from textual.message import Message

from tracer.model_view import tiles

from .mini_heat import MiniHeat

ROWS, COLS = 8, 10                                    # cells drawn: 10 wide, 4 lines
NEGATIVE, ZERO, POSITIVE = (33, 102, 172), (247, 247, 247), (178, 24, 43)


def diverging(t: float) -> Color:
    """t in [−1, 1]: blue through white to red."""
    t = min(max(t, -1.0), 1.0) if math.isfinite(t) else 0.0
    far = POSITIVE if t > 0 else NEGATIVE
    return Color.from_rgb(*(round(z + (f - z) * abs(t)) for z, f in zip(ZERO, far)))


class HeadTile(MiniHeat):
    """A head of one layer of the model view; `show` draws whichever head the tile holds now (the
    sort moves heads between tiles)."""

    @dataclass
    class Picked(Message):
        layer: int
        head: int

    def __init__(self, layer: int, head: int, **kwargs) -> None:
        super().__init__(head, **kwargs)
        self.layer_index = layer   # (a widget's `layer` is its CSS layer)
        self.border_title = f"h{head}"

    def show(self, head: int, tile: np.ndarray, signed: bool, note: str) -> None:
        self.head = head
        self.border_title, self.border_subtitle = f"h{head}", note
        small = tiles.shrink(tile, ROWS, COLS, signed)
        top = float(np.abs(small).max()) if small.size else 0.0
        self.paint(small / top if top > 0 else small, diverging if signed else None)

    def key_enter(self) -> None:
        self.post_message(self.Picked(self.layer_index, self.head))

    def on_click(self) -> None:
        self.post_message(self.Picked(self.layer_index, self.head))
