"""The top bar: the scenario, the step, the head and the arithmetic in force, always on screen,
and one line for what is happening (compiling, an error, a warning, what was just done)."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from .fit import clip, clip_text

STYLES = {"error": "bold white on dark_red", "warning": "bold yellow", "busy": "bold green", "done": "bold green",
          "right": "bold green", "wrong": "bold yellow"}
PREFIX = {"error": "error: ", "warning": "warning: ", "busy": "⏳ ", "done": "✓ "}


class StatusBar(Static):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.parts: tuple[str, ...] | None = None   # scenario, step, head, arithmetic, detail
        self.message, self.kind = "", ""

    def set_where(self, scenario: str, step_id: str, head: str, arithmetic: str, detail: str) -> None:
        self.parts = (scenario, step_id, head, arithmetic, detail)
        self.refresh(layout=True)

    def say(self, message: str, kind: str = "info") -> None:
        """kind: info, busy, warning, error, done (each stays until the next message; `fade` ends
        a done or info one at the next key), or a quiz's right/wrong."""
        self.message, self.kind = message, kind if message else ""
        self.refresh(layout=True)

    def fade(self) -> None:
        """A key was pressed: what was done before it (a file written, a notice) has been read."""
        if self.kind in ("done", "info"):
            self.say("")

    def where(self, width: int) -> Text:
        """The top line, whole if it fits, else without the words `scenario`, `step`, `arithmetic`,
        then with the arithmetic's detail cut at a word's end: never half a word."""
        if self.parts is None:
            return Text("attnsim", style="bold")
        scenario, step_id, head, arithmetic, detail = self.parts
        for named in (True, False):
            text = Text(no_wrap=True)
            text.append("scenario " if named else "", style="dim").append(scenario, style="bold")
            text.append(" │ step " if named else " │ ", style="dim").append(step_id, style="bold cyan")
            if head:
                text.append(f" │ {head}", style="cyan")
            text.append(" │ arithmetic " if named else " │ ", style="dim").append(arithmetic, style="bold magenta")
            room = width - len(text.plain) - 3
            if len(detail) <= room or room >= 8:   # the detail cut before the words that name the parts
                return text.append(f" ({clip(detail, room)})", style="magenta")
        return clip_text(text, width)

    def render(self) -> Text:
        width = self.content_region.width or 200
        text = self.where(width)
        if self.message:
            line = Text(PREFIX.get(self.kind, "") + self.message, style=STYLES.get(self.kind, "dim"))
            text = Text("\n").join([text, line])
        text.no_wrap, text.overflow = True, "ellipsis"   # the top bar never wraps
        return text
