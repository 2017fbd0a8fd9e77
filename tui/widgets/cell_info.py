"""How the cell under the cursor was computed: `explain()` with the real numbers, and which
matrices lit up beside it."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class CellInfo(Static):
    def show(self, where: str, story: str, lit: list[str]) -> None:
        text = Text()
        text.append("cell ", style="dim").append(where, style="bold")
        text.append("\n" + story, style="bold green")
        if lit:
            text.append("\nfrom the highlighted cells of " + ", ".join(lit), style="dim")
        self.update(text)
