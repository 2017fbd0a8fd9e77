"""`o`: choose a scenario, one of the built-ins or any .toml file by path; returns its name or
path (the main screen loads it and keeps the old one open if it fails). Typing filters the list
of built-ins by name; enter opens what was typed, or the one built-in left, or the one picked."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList
from textual.widgets.option_list import Option

import tracer


class PickerScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "cancel")]

    def __init__(self) -> None:
        super().__init__()
        self.builtins = tracer.list_builtins()

    def compose(self) -> ComposeResult:
        with Vertical(id="picker", classes="dialog"):
            yield Label("Open a scenario: type a name or a .toml path, enter opens it", classes="dialog-title")
            yield Input(placeholder="a built-in's name, or path/to/scenario.toml", compact=True, id="path")
            yield OptionList(*self._options(""), id="builtins")

    def _options(self, typed: str) -> list[Option]:
        return [Option(Text.assemble((name, "bold"), "  ", (text, "dim")), id=name)
                for name, text in self.builtins if typed.lower() in name.lower()]

    def on_input_changed(self, event: Input.Changed) -> None:
        listed = self.query_one("#builtins", OptionList)
        listed.clear_options()
        listed.add_options(self._options(event.value.strip()))
        listed.highlighted = 0 if listed.option_count else None

    def on_key(self, event) -> None:
        """A character typed on the list goes to the name (the list is for arrows and enter)."""
        typing = self.query_one("#path", Input)
        if typing.has_focus and event.key == "down":   # from the name to the list
            event.stop()
            self.query_one("#builtins", OptionList).focus()
        elif not typing.has_focus and event.character and event.character.isprintable():
            event.stop()
            typing.insert_text_at_cursor(event.character)
            typing.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        typed = event.value.strip()
        names = [name for name, _ in self.builtins]
        listed = self.query_one("#builtins", OptionList)
        if typed not in names and listed.option_count and not typed.endswith(".toml"):
            picked = listed.get_option_at_index(listed.highlighted or 0)   # a part of a name, or none: the one lit
            self.dismiss(picked.id)
        else:
            self.dismiss(typed or None)
