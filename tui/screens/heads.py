"""The heads overview: every head's attention weights as a small heatmap in one grid (as in
BertViz's model view); the arrows or Tab pick a head, Enter opens it in the main screen."""
from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, VerticalScroll
from textual.screen import Screen
from textual.widgets import Static
from textual.worker import get_current_worker

from tracer.ids import step_id
from tracer.mechanisms import dropped_cells
from tracer.mechanisms.indexer.compute import k_of

from ..widgets.fit import KeyBar
from ..widgets.mini_heat import MiniHeat

TILE = 20   # a tile's width with its border and gap


class HeadsScreen(Screen[tuple | None]):
    """Returns (head, layer index) chosen, or None on Esc. `layers` is a list of (label, trace or a
    callable that builds it): a real model passes one per layer and `,` / `.` switch between them
    (a layer is built, off the screen's thread, the first time it is shown)."""

    BINDINGS = [
        Binding("escape,m", "dismiss(None)", "back"),
        Binding("left", "move(-1)", "prev head", show=False),
        Binding("right", "move(1)", "next head", show=False),
        Binding("up", "move_row(-1)", "head above", show=False),
        Binding("down", "move_row(1)", "head below", show=False),
        Binding("comma", "layer(-1)", "prev layer", key_display=","),
        Binding("full_stop", "layer(1)", "next layer", key_display="."),
    ]

    def __init__(self, layers: list[tuple[str, object]], head: int = 0, layer: int = 0) -> None:
        super().__init__()
        self.per_layer, self.head, self.layer_at = list(layers), head, layer
        self.scenario_name = self.trace.scenario.name
        self._implicit = False   # the layer on view is linear: its tiles are the implicit weights

    @property
    def trace(self):
        """The layer on view: its trace, once built (the layer given first always is)."""
        got = self.per_layer[self.layer_at][1]
        return None if callable(got) else got

    def _built(self, at: int):
        """The trace of layer `at`, building it the first time (called from the worker)."""
        label, got = self.per_layer[at]
        if callable(got):
            got = got()
            self.per_layer[at] = (label, got)
        return got

    def compose(self) -> ComposeResult:
        yield Static(id="heads-title")
        with VerticalScroll():
            yield Grid(*[MiniHeat(h, classes="tile") for h in range(self.trace.heads)], id="heads-grid")
        yield KeyBar()

    def check_action(self, action: str, parameters) -> bool | None:
        return len(self.per_layer) > 1 if action == "layer" else True

    def on_mount(self) -> None:
        self._title("computing each head's weights…")
        self.on_resize()
        self.query(MiniHeat)[min(self.head, self.trace.heads - 1)].focus()
        self._draw(self.layer_at)

    def _title(self, note: str = "") -> None:
        label, heads = self.per_layer[self.layer_at][0], len(self.query(MiniHeat))
        what = "implicit weights (linear: A with o = A·v)" if self._implicit else "attention weights"
        text = f"{self.scenario_name} │ {label} │ {heads} heads' {what}"
        self.query_one("#heads-title", Static).update(text + (f" │ {note}" if note else "")
                                                      + "\nenter: open the head · arrows: pick · esc: back")

    @work(thread=True, exclusive=True)
    def _draw(self, at: int) -> None:
        """Each head's weights (a layer is built and a lazy trace computes its heads here, off the
        screen's thread)."""
        try:
            trace = self._built(at)
        except Exception as err:  # noqa: BLE001 (a layer that cannot be built: said, not a crash)
            self.app.call_from_thread(self._title, f"cannot build this layer: {str(err).splitlines()[0]}")
            return
        self._implicit = step_id("weights", 0) not in trace   # a linear layer: the weights it implies
        for h in range(min(trace.heads, len(self.query(MiniHeat)))):
            sid = step_id("implicit" if self._implicit else "weights", h)
            weights = trace[sid]
            if get_current_worker().is_cancelled:
                return
            step = trace.step(sid)
            note = f"top-{k_of(trace)}" if trace.scenario.sparse is not None else ""   # a lightning indexer's
            self.app.call_from_thread(self.query(MiniHeat)[h].draw, weights, step.axes, dropped_cells(trace, step), note)
        self.app.call_from_thread(self._title)

    def on_resize(self) -> None:
        grid = self.query_one("#heads-grid", Grid)
        grid.styles.grid_size_columns = self.columns()

    def columns(self) -> int:
        return max(1, self.size.width // TILE)

    def _focus(self, head: int) -> None:
        tiles = self.query(MiniHeat)
        if 0 <= head < len(tiles):
            tiles[head].focus()

    def action_move(self, delta: int) -> None:
        self._focus(self._focused() + delta)

    def action_move_row(self, delta: int) -> None:
        self._focus(self._focused() + delta * self.columns())

    def _focused(self) -> int:
        return self.focused.head if isinstance(self.focused, MiniHeat) else 0

    def action_layer(self, delta: int) -> None:
        self.layer_at = (self.layer_at + delta) % len(self.per_layer)
        self._title("computing each head's weights…")
        self._draw(self.layer_at)

    def on_mini_heat_chosen(self, message: MiniHeat.Chosen) -> None:
        self.dismiss((message.head, self.per_layer[self.layer_at][1]))
