"""The quiz's answer line: takes every printable key typed (so no letter of an answer fires a
command), Enter submits, the arrows move the cell cursor, Esc hands the keys back to the browser."""
from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Static

MAX_TYPED = 60  # longer than any accepted answer; the check says what is accepted


class AnswerLine(Static, can_focus=True):
    BINDINGS = [
        Binding("enter", "submit", "check", tooltip="check the answer typed into the cell"),
        Binding("up", "move(-1, 0)", "cell up", show=False),
        Binding("down", "move(1, 0)", "cell down", show=False),
        Binding("left", "move(0, -1)", "cell left", show=False),
        Binding("right", "move(0, 1)", "cell right", show=False),
        Binding("backspace", "erase", "erase", show=False),
        Binding("escape", "leave", "browser keys", tooltip="leave the answer line: every browser key works again"),
    ]

    @dataclass
    class Submitted(Message):
        text: str

    @dataclass
    class Move(Message):
        rows: int
        cols: int

    class Leave(Message):
        """Esc: the browser keys (n, p, a, …) take over until a number is typed again."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.typed = ""
        # The keys are the answer's, whoever has the focus: a focus change lands after the keys
        # already on their way, so a burst typed right after Esc must not depend on it.
        self.active = False

    def check_consume_key(self, key: str, character: str | None) -> bool:
        return self.active and character is not None and character.isprintable()

    def on_key(self, event) -> None:
        if self.active and self.take(event):
            event.stop()
            event.prevent_default()

    def take(self, event) -> bool:
        """Handles a key as the answer line does (a character, enter, backspace, the arrows, esc),
        wherever it arrived; False for any other key."""
        if event.character is not None and event.character.isprintable() and len(event.character) == 1:
            self.type(event.character)
            return True
        action = {"enter": self.action_submit, "backspace": self.action_erase, "escape": self.action_leave,
                  "up": lambda: self.action_move(-1, 0), "down": lambda: self.action_move(1, 0),
                  "left": lambda: self.action_move(0, -1), "right": lambda: self.action_move(0, 1)}.get(event.key)
        if action is not None:
            action()
        return action is not None

    def type(self, text: str) -> None:
        self.typed = (self.typed + text)[:MAX_TYPED]
        self.refresh()

    def clear(self) -> None:
        self.typed = ""
        self.refresh()

    def render(self) -> Text:
        text = Text()
        if self.active:
            text.append("answer ▸ ", style="bold").append(self.typed, style="bold reverse").append("▏")
            text.append("   enter check · ctrl+r reveal · tab next ? · esc browser keys · ctrl+q quit", style="dim")
        else:
            text.append("answer ▸ ", style="dim").append(self.typed)
            text.append("   type a number or press enter to answer · z ends the quiz", style="dim")
        return text

    def on_focus(self) -> None:
        self.active = True   # clicked, or claimed by the screen (already active then)
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()   # not inactive: a blur may land after keys that claimed the line again

    def action_submit(self) -> None:
        self.post_message(self.Submitted(self.typed))

    def action_erase(self) -> None:
        self.typed = self.typed[:-1]
        self.refresh()

    def action_move(self, rows: int, cols: int) -> None:
        self.post_message(self.Move(rows, cols))

    def action_leave(self) -> None:
        self.active = False   # at once: the keys typed next are the browser's
        self.post_message(self.Leave())
