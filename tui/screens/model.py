"""`M`: the model view (CONTRACT §20). Every layer of the checkpoint the scenario comes from, a row
each (its kind, heads and memory over a grid of its heads' tiles), computed once in a worker while
the rows appear; `s` orders each layer's heads by a role score, the arrows pick a head, Enter opens
that layer at that head in the main screen (returned as (head, trace), as the heads overview does)."""
from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, VerticalScroll
from textual.screen import Screen
from textual.widgets import Static
from textual.worker import get_current_worker

from tracer.model_view import open_view
from tracer.model_view.report import compact
from tracer.model_view.roles import ROLES

from ..session import one_line
from ..widgets.fit import KeyBar, clip
from ..widgets.head_tile import HeadTile

SORTS = (None,) + ROLES
SHORT = {"previous": "prv", "first": "1st", "duplicate": "dup", "induction": "ind"}
TILE = 13          # a tile's width with its border and the gap after it
_views: dict = {}  # the last view computed, by (checkpoint, text): `M` again shows it at once


def _score(s: float) -> str:
    """A score in at most 4 characters, for a tile's border: `.35`, `1.0`, `−.2`."""
    return f"{s:.2f}"[1:] if 0 <= s < 0.995 else f"{s:.2g}".replace("0.", ".").replace("-", "−")


class ModelScreen(Screen[tuple | None]):
    """Returns (head, trace of the layer chosen), or None on Esc."""

    # no focus on arrival (None would be the app's rule, the first tile): the cursor starts at the main
    # screen's layer and head (_add); a view opened again is drawn at once, before the first tile took it
    AUTO_FOCUS = ""

    BINDINGS = [
        Binding("escape,M", "dismiss(None)", "back", key_display="esc"),
        Binding("s", "sort", "sort", tooltip="order each layer's heads by a role score (previous, first, "
                "duplicate, induction) or by number"),
        # before the scrolling container's own arrows: a move of the focus scrolls it into sight
        Binding("left", "move(-1)", "prev head", show=False, priority=True),
        Binding("right", "move(1)", "next head", show=False, priority=True),
        Binding("up", "move_row(-1)", "head above", show=False, priority=True),
        Binding("down", "move_row(1)", "head below", show=False, priority=True),
        Binding("enter", "open", "open", show=False, priority=True),
    ]

    def __init__(self, session, trace, head: int = 0) -> None:
        super().__init__()
        self.session, self.trace, self.model = session, trace, trace.scenario.model
        self.start = (self.model["layer"], head)
        self.view, self.sort, self.note = None, 0, ""
        self.at: tuple[int, int] | None = None     # the cursor: (layer, tile position)
        self.asked: list[HeadTile] = []            # tiles _go focused whose focus events have not come yet
        self.tiles: dict[int, list[HeadTile]] = {}

    def compose(self) -> ComposeResult:
        yield Static(id="model-title")
        yield VerticalScroll(id="model-rows", can_focus=False)
        yield KeyBar()

    def on_mount(self) -> None:
        key = (self.model["path"], self.model["text"])
        if key in _views:
            self.view = _views[key]
            for row in self.view.layers:
                self._add(row)
            self._title("")   # nothing is being computed: not the "computing layer …" each row's _add says
        else:
            self._title(f"computing layer 0 of {self.model['layers']}…")
            self._compute(key)

    @work(thread=True, exclusive=True, group="model")
    def _compute(self, key) -> None:
        """Streams the checkpoint once, each layer's row shown as soon as it is done."""
        try:
            view = open_view(*key)
            self.view = view
            for row in view.compute():
                if get_current_worker().is_cancelled:
                    return
                self.app.call_from_thread(self._add, row)
        except Exception as err:  # noqa: BLE001 (a model that cannot be read: said, not a crash)
            self.app.call_from_thread(self._title, f"cannot compute the model view: {one_line(err)}")
            return
        _views.clear()
        _views[key] = view
        self.app.call_from_thread(self._title, "")

    def _add(self, row) -> None:
        """A layer's line and the grid of its heads' tiles."""
        label = Static(clip(f"layer {row.layer} · {row.kind} · {row.heads}/{row.kv_heads} heads · keeps "
                            f"{row.memory.words()} ({row.cache})", max(20, self.size.width - 2)), classes="model-layer")
        tiles = [HeadTile(row.layer, h) for h in range(row.heads)]
        grid = Grid(*tiles, classes="model-grid")
        grid.styles.grid_size_columns = self.columns()
        self.query_one("#model-rows", VerticalScroll).mount(label, grid)
        self.tiles[row.layer] = tiles
        self._draw(row)
        if row.layer == self.start[0]:   # once mounted: the layer open in the main screen, at its head
            self.call_after_refresh(self._go, row.layer, min(self.start[1], row.heads - 1))
        if len(self.tiles) < self.model["layers"]:
            self._title(f"computing layer {len(self.tiles)} of {self.model['layers']}…")

    def _draw(self, row) -> None:
        """The layer's heads in the order the sort asks for, each tile with its note."""
        role = SORTS[self.sort]
        order = sorted(range(row.heads), key=lambda h: -row.scores[role][h]) if role else range(row.heads)
        for tile, h in zip(self.tiles[row.layer], order):
            said = role or max(ROLES, key=lambda r: row.scores[r][h])
            tile.show(h, row.tiles[h], row.signed, SHORT[said] + _score(row.scores[said][h]))

    def _title(self, note: str | None = None) -> None:
        """What the model keeps, the sort and its best heads, then what is happening (`note`, kept
        until another replaces it; "" clears it) or the scores of the head under the cursor."""
        self.note = self.note if note is None else note
        width, v = max(20, self.size.width - 2), self.view
        lines = [f"{self.trace.scenario.name} │ model view: {self.model['layers']} layers × heads"]
        if v is not None and v.layers and len(v.layers) == v.layer_count:
            lines = [f"{v.name} ({v.model_type}) │ {v.layer_count} layers │ {len(v.tokens)} tokens",
                     f"cache at {v.context:,} tokens ({v.dtype}): {compact(v.cache_bytes)} │ multi-head attention: "
                     f"{compact(v.mha_cache_bytes)}"]
            role = SORTS[self.sort]
            lines.append(f"sorted by {role}: best " + ", ".join(f"L{l} h{h} {s:.2f}" for l, h, s in v.best(role, 4))
                         if role else "heads in order · s: sort by a role score · enter: open the head")
        lines.append(self.note or self._head_line() or "arrows: pick a head · enter: open it · esc: back")
        self.query_one("#model-title", Static).update("\n".join(clip(line, width) for line in lines))

    def _head_line(self) -> str:
        """`layer 1 head 3: previous 0.057 · first 0.626 · … · qk σ 2.51 2.2 2.05 · ov σ …`."""
        row = None if self.at is None or self.view is None else \
            next((r for r in self.view.layers if r.layer == self.at[0]), None)
        if row is None:
            return ""
        h = self._head()
        said = " · ".join(f"{r} {row.scores[r][h]:.3f}" for r in ROLES)
        said += "".join(f" · {name} σ {' '.join(f'{x:.3g}' for x in m[h])}"
                        for name, m in (("qk", row.qk), ("ov", row.ov)) if m is not None)
        return f"layer {row.layer} head {h}: {said}"

    def columns(self) -> int:
        return max(1, (self.size.width - 2) // TILE)

    def on_resize(self) -> None:
        for grid in self.query(".model-grid").results(Grid):
            grid.styles.grid_size_columns = self.columns()

    def action_sort(self) -> None:
        if self.view is None or len(self.tiles) < self.model["layers"]:
            self._title("the sort waits until every layer is computed")
            return
        head = self._head()
        self.sort = (self.sort + 1) % len(SORTS)
        for row in self.view.layers:
            self._draw(row)
        if head is not None:   # the same head keeps the cursor, wherever the sort put it
            layer = self.at[0]
            self._go(layer, next(k for k, t in enumerate(self.tiles[layer]) if t.head == head))
        self._title("")

    def _go(self, layer: int, k: int) -> None:
        """The cursor to tile k of the layer (kept here, not read back from the focus, which moves
        a frame later: keys typed fast each move on from where the last one left it)."""
        self.at = (layer, k)
        self.asked.append(self.tiles[layer][k])
        self.tiles[layer][k].focus()
        self._title()

    def _head(self) -> int | None:
        return None if self.at is None else self.tiles[self.at[0]][self.at[1]].head

    def on_descendant_focus(self, event) -> None:
        """The cursor follows a focus that came from elsewhere (a click). The focus a key asked for
        arrives a frame later, when the cursor may have moved on (keys typed fast): it moves nothing."""
        tile = event.widget
        if tile in self.asked:
            del self.asked[:self.asked.index(tile) + 1]
            return
        if isinstance(tile, HeadTile) and tile in self.tiles.get(tile.layer_index, []):
            self.at = (tile.layer_index, self.tiles[tile.layer_index].index(tile))
            self._title()

    def action_move(self, delta: int) -> None:
        if self.at is not None and 0 <= self.at[1] + delta < len(self.tiles[self.at[0]]):
            self._go(self.at[0], self.at[1] + delta)

    def action_move_row(self, delta: int) -> None:
        """A line of tiles up or down: within the layer's grid, else into the layer above or below."""
        if self.at is None:
            return
        (layer, k), cols = self.at, self.columns()
        if 0 <= k + delta * cols < len(self.tiles[layer]):
            self._go(layer, k + delta * cols)
        elif layer + delta in self.tiles:
            there = len(self.tiles[layer + delta])
            last = (there - 1) // cols * cols            # the first tile of the last line above
            self._go(layer + delta, min((last if delta < 0 else 0) + k % cols, there - 1))

    def action_open(self) -> None:
        if self.at is not None:
            self.post_message(HeadTile.Picked(self.at[0], self._head()))

    def on_head_tile_picked(self, message: HeadTile.Picked) -> None:
        heads = self.model.get("heads")   # a scenario of a few heads numbers them from 0 again
        if heads is not None and message.head not in heads:
            self._title(f"head {message.head} is not among this scenario's heads ({', '.join(map(str, heads))})")
            return
        head = message.head if heads is None else heads.index(message.head)
        if message.layer == self.model["layer"]:
            self.dismiss((head, self.trace))   # the layer already open
            return
        self._title(f"opening layer {message.layer} at head {message.head}…")
        self._open(message.layer, head)

    @work(thread=True, exclusive=True, group="open")
    def _open(self, layer: int, head: int) -> None:
        """The layer built as the heads overview builds it (same text, heads and arithmetic)."""
        try:
            built = self.session.layers(self.trace)[0][layer][1]
            trace = built() if callable(built) else built
        except Exception as err:  # noqa: BLE001
            self.app.call_from_thread(self._title, f"cannot open layer {layer}: {one_line(err)}")
            return
        self.app.call_from_thread(self.dismiss, (head, trace))
