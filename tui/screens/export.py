"""`e`: write the trace with the tracer's exports (json, npz, csv, an md worksheet, or a picture:
svg, png), all steps or only the one on screen; errors stay in the dialog so the path can be fixed."""
from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Select

FORMATS = {"json": "json: every step, strict JSON", "npz": "npz: one array per step (numpy)",
           "csv": "csv: step,row,col,value", "md": "md: a worksheet, a table per step",
           "svg": "svg: a picture (text stays text)", "png": "png: a picture, 200 dpi"}
FIGURES = {"heatmap": "picture: heatmap of each step", "worksheet": "picture: the head's worksheet",
           "lines": "picture: weights as lines"}


class ExportScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "cancel")]

    def __init__(self, trace, step_id: str, arithmetic: str) -> None:
        super().__init__()
        self.trace, self.step_id = trace, step_id
        self.default = f"{trace.scenario.name}-{arithmetic.split(' ')[0]}.json"

    def compose(self) -> ComposeResult:
        with Vertical(id="export", classes="dialog"):
            yield Label("Export the trace (enter writes, esc cancels)", classes="dialog-title")
            yield Input(self.default, placeholder="file to write", compact=True, id="path")
            yield Select([(text, key) for key, text in FORMATS.items()], value="json", allow_blank=False,
                         compact=True, id="format")
            yield Select([(text, key) for key, text in FIGURES.items()], value="heatmap", allow_blank=False,
                         compact=True, id="figure")
            yield Checkbox(f"only this step ({self.step_id})", compact=True, id="only")
            yield Checkbox("blank worksheet (md, worksheet: computed cells left empty)", compact=True, id="blank")
            yield Label("", id="error")
            with Horizontal(classes="buttons"):
                yield Button("Export", variant="primary", compact=True, id="write")
                yield Button("Cancel", compact=True, id="cancel")

    def on_select_changed(self, event: Select.Changed) -> None:
        """Keeps the file's extension in step with the format chosen."""
        if event.select.id != "format":
            return
        path = self.query_one("#path", Input)
        old = Path(path.value)
        if old.suffix.lstrip(".") in FORMATS:
            path.value = str(old.with_suffix(f".{event.value}"))

    def on_input_changed(self, event: Input.Changed) -> None:
        """An extension typed names the format: the list follows it (the path is what is written)."""
        ext = Path(event.value).suffix.lstrip(".").lower()
        select = self.query_one("#format", Select)
        if event.input.id == "path" and ext in FORMATS and select.value != ext:
            select.value = ext

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "write":
            self.write()
        else:
            self.dismiss(None)

    def on_input_submitted(self) -> None:
        self.write()

    def write(self) -> None:
        path = self.query_one("#path", Input).value.strip()
        if not path:
            self._error("expected a file name")
            return
        steps = [self.step_id] if self.query_one("#only", Checkbox).value else None
        ext = Path(path).suffix.lstrip(".").lower()
        fmt = ext if ext in FORMATS else self.query_one("#format", Select).value  # the typed extension wins
        self.query_one("#error", Label).update(Text("writing…", style="green"))
        self._write(path, fmt, steps, self.query_one("#blank", Checkbox).value, self.query_one("#figure", Select).value)

    @work(thread=True, exclusive=True)
    def _write(self, path: str, fmt: str, steps, blank: bool, figure: str) -> None:
        try:
            from tracer.export import PICTURES, write_export, written  # lazily: the main screen never needs it
            path = str(write_export(self.trace, path, fmt=fmt, steps=steps, blank=blank, figure=figure))
            what = f"{figure} picture" if fmt in PICTURES else written(self.trace, fmt, steps)
        except Exception as err:  # noqa: BLE001  bad input: said in the dialog, never a traceback
            self.app.call_from_thread(self._error, str(err).splitlines()[0] if str(err) else type(err).__name__)
            return
        self.app.call_from_thread(self._done, path, f"{fmt}: {what}")

    def _error(self, message: str) -> None:
        self.query_one("#error", Label).update(Text(message, style="bold red"))

    def _done(self, path: str, what: str = "") -> None:
        self.app.notify(f"wrote {path} ({what})" if what else f"wrote {path}", title="export")
        self.dismiss(f"{path} ({what})" if what else path)
