"""The attnsim terminal UI: a thin App that opens the main screen; the screens hold the logic.
`run_app()` is what `attnsim` / `attnsim tui SCENARIO` call."""
from __future__ import annotations

from textual.app import App
from textual.binding import Binding


class AttnApp(App):
    """Steps through a trace of self-attention; see the help screen (`?`) for every key."""

    CSS_PATH = "app.tcss"
    TITLE = "attnsim"
    BINDINGS = [Binding("q", "quit", "quit", tooltip="quit attnsim")]

    def __init__(self, scenario=None, arithmetic: str | None = None, overrides: dict | None = None,
                 quiz: list[str] | None = None, save=None) -> None:
        super().__init__()
        self.start = (scenario, arithmetic, overrides, quiz, save)

    def on_mount(self) -> None:
        from .screens.main import MainScreen  # imported here: `import tui.app` stays light
        self.push_screen(MainScreen(*self.start))


def run_app(scenario: str | None = None, arithmetic: str | None = None, overrides: dict | None = None,
            quiz: list[str] | None = None, save=None) -> None:
    """Opens the UI on `scenario` (a built-in name or a .toml path; default by_hand) under the
    arithmetic preset (default: the scenario's) with `--set` overrides (key → text); `quiz`:
    start with these steps' cells hidden ([] for every computed step); `save`: a QuizSave
    (tui/quiz_save.py) that keeps and resumes the answers."""
    AttnApp(scenario, arithmetic, overrides, quiz, save).run()
