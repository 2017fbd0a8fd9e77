"""Words cut to a width at a word's end, never in the middle of one: a top bar, a panel's title or
the key bar at 80 columns says less, but nothing it says is half a word."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

BREAKS = " ,;·│(/"   # a cut may fall after any of these


def clip(text: str, width: int) -> str:
    """`text` whole when it fits in `width`, else up to the last word boundary that leaves room
    for …; a single word longer than the width is cut with … (nothing else would fit)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:max(width, 0)]
    head = text[:width - 1]
    cut = max(head.rfind(c) for c in BREAKS)
    head = head[:cut + 1] if cut > 0 else head
    return head.rstrip(" ,;·│(/") + "…"


def clip_text(text: Text, width: int) -> Text:
    """As `clip`, keeping the styles of a rich Text."""
    if len(text.plain) <= width:
        return text
    kept = clip(text.plain, width)
    out = text[:len(kept) - 1]
    out.append("…", style=text.get_style_at_offset(None, len(kept) - 2) if len(kept) > 1 else "")
    return out


class KeyBar(Footer):
    """The footer with only the keys that fit whole, in order; `?` (first) lists them all."""

    PALETTE = 12   # the command palette's key, docked right: "▏^p palette "
    _shown: tuple | None = None   # what the bar was last composed from

    def _keys(self) -> tuple:
        """What compose draws from: the width and each shown binding as the screen has it now."""
        return (self.size.width, self.compact, self.show_command_palette, self._bindings_ready,
                tuple((b.key, self.app.get_key_display(b), b.description, b.action, b.group, enabled, tooltip)
                      for _, b, enabled, tooltip in self.screen.active_bindings.values() if b.show))

    async def recompose(self) -> None:
        # Textual recomposes the footer at every change of focus, and most leave its keys as they
        # were: building its keys again (a score of widgets, each styled) took a third of a step's time
        keys = self._keys() if self.is_attached else None
        if keys is not None and keys == self._shown:
            return
        self._shown = keys
        await super().recompose()

    def compose(self):
        room, full = self.size.width - self.PALETTE, False
        for widget in super().compose():
            if isinstance(widget, FooterKey) and not widget.has_class("-command-palette"):
                need = len(widget.key_display) + len(widget.description) + 3   # " k " + "words "
                full = full or need > room
                room -= need
                if full:
                    continue
            yield widget

    def on_resize(self) -> None:
        self.refresh(recompose=True)
