"""The attnsim terminal UI: a thin App that opens the main screen; the screens hold the logic.
`run_app()` is what `attnsim` / `attnsim tui SCENARIO` call."""
from __future__ import annotations

import gc

from textual.app import App
from textual.binding import Binding


class AttnApp(App):
    """Steps through a trace of self-attention; see the help screen (`?`) for every key."""

    CSS_PATH = "app.tcss"
    TITLE = "attnsim"
    BINDINGS = [Binding("q", "quit", "quit", tooltip="quit attnsim")]

    def __init__(self, scenario=None, arithmetic: str | None = None, overrides: dict | None = None,
                 quiz: list[str] | None = None, save=None, freeze: bool = False) -> None:
        super().__init__()
        self.start = (scenario, arithmetic, overrides, quiz, save)
        self.freeze = freeze   # the app is the process's whole life (the command line): see keep_what_is_alive

    def on_mount(self) -> None:
        from .screens.main import MainScreen  # imported here: `import tui.app` stays light
        self.push_screen(MainScreen(*self.start))

    def keep_what_is_alive(self) -> None:
        """Called once a new trace is on screen. Python's full collection walks every object the
        app holds (~80 ms beside a GPT-2 layer) whenever enough new ones have piled up, often in
        the middle of a key; collected now and the survivors set aside (gc.freeze), a collection
        walks only what is newer. A trace has no reference cycles: an old one is freed when the
        screen lets go of it, frozen or not.
        Only where the app is the process's whole life (`freeze`, the command line's): a process
        that opens many apps (a test run) would walk everything it ever loaded again at each one's
        first trace, since each app's end makes it all collectable again (a third of a second in a
        test worker: a quarter of the TUI's tests' time)."""
        if self.freeze:
            gc.collect()
            gc.freeze()

    def on_unmount(self) -> None:
        if self.freeze:
            gc.unfreeze()   # everything this app held is collectable again


def run_app(scenario: str | None = None, arithmetic: str | None = None, overrides: dict | None = None,
            quiz: list[str] | None = None, save=None) -> None:
    """Opens the UI on `scenario` (a built-in name or a .toml path; default by_hand) under the
    arithmetic preset (default: the scenario's) with `--set` overrides (key → text); `quiz`:
    start with these steps' cells hidden ([] for every computed step); `save`: a QuizSave
    (tui/quiz_save.py) that keeps and resumes the answers."""
    AttnApp(scenario, arithmetic, overrides, quiz, save, freeze=True).run()
