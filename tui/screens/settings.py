"""`s`: each key of the arithmetic on its own (scale, softmax base, normalisation, stability, dtype,
mask) and the layout; returns the new session, or None when cancelled."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select

import tracer
from tracer.arithmetic import PRESETS, WORDS, resolve

from ..session import Session

TYPED = ("scale", "softmax_base", "block")              # free values: typed in
CHOSEN = {"normalize": ("softmax", "relu"), "stable": ("true", "false"), "dtype": ("float64", "float32"),
          "algorithm": ("standard", "online")}
# the order of the contract's tables (the arithmetic's keys, then the algorithm's); then the view
ORDER = ("scale", "softmax_base", "normalize", "stable", "dtype", "mask", "algorithm", "block", "layout")
KEEP = "matrix"  # the mask Select's value for a matrix already set: kept as it is
HINTS = {"scale": "sqrt, floor, none or a number c (÷c)", "softmax_base": "e or a number > 1",
         "block": "keys per block under online (a whole number ≥ 1)"}


def _text(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


def _select(options, value, key: str) -> Select:
    return Select(options, value=value, allow_blank=False, compact=True, id=key)


class SettingsScreen(ModalScreen[Session | None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "cancel")]

    def __init__(self, session: Session, trace: tracer.Trace | None) -> None:
        super().__init__()
        self.session = session
        self.layout_now = trace.layout if trace is not None else session.scenario.layout

    def compose(self) -> ComposeResult:
        with Vertical(id="settings", classes="dialog"):
            yield Label("Arithmetic, key by key (enter applies, esc cancels)", classes="dialog-title")
            with Grid(id="fields"):
                yield Label("preset")
                yield _select([(p, p) for p in PRESETS], self.session.preset, "preset")
                for key in ORDER:
                    yield Label(key)
                    yield self._field(key)
            yield Label("", id="error")
            with Horizontal(classes="buttons"):
                yield Button("Apply", variant="primary", compact=True, id="apply")
                yield Button("Preset's values", compact=True, id="reset")
                yield Button("Cancel", compact=True, id="cancel")

    def _field(self, key: str):
        a, sc = self.session.arithmetic(), self.session.scenario
        if key in TYPED:
            return Input(_text(getattr(a, key)), placeholder=HINTS[key], compact=True, id=key)
        if key in CHOSEN:
            return _select([(v, v) for v in CHOSEN[key]], _text(getattr(a, key)), key)
        if key == "layout":
            layouts = [("rows: one row per token", "rows"), ("columns: one column per token", "columns")]
            return _select(layouts, self.layout_now, "layout")
        mask_now = self.session.overrides.get("mask", "scenario")
        scenario_mask = sc.mask if isinstance(sc.mask, str) else "a matrix"
        masks = [(f"the scenario's ({scenario_mask})", "scenario"), *((w, w) for w in WORDS["mask"])]
        if isinstance(mask_now, str) and mask_now not in {v for _, v in masks}:
            masks.append((mask_now, mask_now))   # sliding:W, set from the palette or --set
        elif not isinstance(mask_now, str):
            masks.append(("the matrix set", KEEP))   # a 0/1 matrix from --set or the palette
        return _select(masks, mask_now if isinstance(mask_now, str) else KEEP, "mask")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "apply":
            self.apply()
        elif event.button.id == "reset":
            self.reset()
        else:
            self.dismiss(None)

    def on_input_submitted(self) -> None:
        self.apply()

    def reset(self) -> None:
        """Fills the arithmetic keys with the chosen preset's values."""
        a = resolve(self.query_one("#preset", Select).value, self.session.scenario.defaults)
        for key in TYPED:
            self.query_one(f"#{key}", Input).value = _text(getattr(a, key))
        for key in CHOSEN:
            self.query_one(f"#{key}", Select).value = _text(getattr(a, key))

    def apply(self) -> None:
        sc = self.session.scenario
        preset = self.query_one("#preset", Select).value
        values = {key: self.query_one(f"#{key}", Input).value for key in TYPED}
        values.update({key: self.query_one(f"#{key}", Select).value for key in CHOSEN})
        try:
            base = resolve(preset, sc.defaults)
            chosen = resolve(preset, {**sc.defaults, **values})
        except tracer.ScenarioError as err:
            self.query_one("#error", Label).update(Text(str(err), style="bold red"))
            return
        # only what differs from the preset is an override, so the header stays short
        overrides = {k: values[k] for k in values if getattr(chosen, k) != getattr(base, k)}
        mask = self.query_one("#mask", Select).value
        if mask == KEEP:
            overrides["mask"] = self.session.overrides["mask"]
        elif mask != "scenario":
            overrides["mask"] = mask
        layout = self.query_one("#layout", Select).value
        if layout != sc.layout:
            overrides["layout"] = layout
        self.dismiss(Session(sc, preset, overrides))
