"""`o`: choose a scenario, one of the built-ins or any .toml file by path; returns its name or
path (the main screen loads it and keeps the old one open if it fails)."""
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

    def compose(self) -> ComposeResult:
        with Vertical(id="picker", classes="dialog"):
            yield Label("Open a scenario", classes="dialog-title")
            options = [Option(Text.assemble((name, "bold"), "  ", (text, "dim")), id=name)
                       for name, text in tracer.list_builtins()]
            yield OptionList(*options, id="builtins")
            yield Label("or a scenario file (enter to open):")
            yield Input(placeholder="path/to/scenario.toml", compact=True, id="path")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)
