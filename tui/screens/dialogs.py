"""The main screen's doors to the other screens (open, settings, export, diff, heads, model, help) and
what it does with their answers, and `g` (a picture); each screen is imported when opened and
imports no other."""
from __future__ import annotations

from dataclasses import replace

from textual import work

from tracer.ids import head_prefix, parse
from tracer.ids import step_id as make_id

from ..session import nearest_step, one_line
from ..widgets.answer import AnswerLine
from ..widgets.matrix import MatrixView
from ..widgets.status import StatusBar


class DialogsMixin:
    """Mixed into MainScreen (which owns trace, session, step_id, cell, head, go, show_step)."""

    def action_open(self) -> None:
        from .picker import PickerScreen
        self.app.push_screen(PickerScreen(), self.open_scenario)

    def action_settings(self) -> None:
        from .settings import SettingsScreen
        if self.session is not None:
            self.app.push_screen(SettingsScreen(self.session, self.trace), self.rerun)

    def action_export(self) -> None:
        from .export import ExportScreen
        if self.trace is not None:
            self.app.push_screen(ExportScreen(self.trace, self.step_id, self.session.label()), self._exported)

    def _exported(self, written) -> None:
        if written:   # on the status line until the next key: a toast is gone before it is read
            self.query_one(StatusBar).say(f"wrote {written}", "done")

    def action_picture(self) -> None:
        """Saves the step on screen as an SVG heatmap (the head's worksheet when it is shown)."""
        if self.trace is None:
            return
        # named by the arithmetic too, as `e` names exports: a by-hand picture never overwrites an exact one
        arithmetic = self.session.label().replace(" + ", "+").replace(", ", ",").replace(" ", "")
        if self.sheet:
            name, kind = f"{self.trace.scenario.name}-{head_prefix(self.head)}worksheet-{arithmetic}.svg", "worksheet"
        else:
            name, kind = f"{self.trace.scenario.name}-{self.step_id}-{arithmetic}.svg", "heatmap"
        step = self.trace.step(self.step_id)
        steps = [step.id] if kind == "heatmap" or step.head is not None else None  # the worksheet's head
        self.query_one(StatusBar).say(f"drawing {name}…", "busy")
        self._draw_picture(self.trace, name, kind, steps)

    @work(thread=True, group="picture")
    def _draw_picture(self, trace, name: str, kind: str, steps) -> None:
        try:
            from tracer.figures import write_figure  # matplotlib: loaded on the first picture only
            path = write_figure(trace, name, steps, kind=kind)
        except Exception as err:  # noqa: BLE001  bad input or no matplotlib: said on the status line
            self.app.call_from_thread(self.query_one(StatusBar).say, one_line(err), "error")
            return
        self.app.call_from_thread(self.query_one(StatusBar).say, f"saved {kind} to {path.resolve()}", "done")

    def action_diff(self) -> None:
        from .diff import DiffScreen
        if self.trace is not None:
            self.app.push_screen(DiffScreen(self.session, self.trace, self.step_id, self.cell, self.fractions),
                                 self._back_from_diff)

    def _back_from_diff(self, where) -> None:
        if where and self.trace is not None and where[0] in self.trace:
            self.show_step(where[0], where[1])

    def _shown(self, key: str) -> bool:
        """Whether a trace is on screen; else the status line says so (a key pressed while it is being
        computed is not lost without a word)."""
        if self.trace is None:
            self.query_one(StatusBar).say(f"the trace is still being computed: press {key} again once it is shown",
                                          "warning")
        return self.trace is not None

    def action_heads(self) -> None:
        from .heads import HeadsScreen
        if not self._shown("m"):
            return
        if self.trace.heads < 2:
            self.notify("this scenario has one head: the overview is for several", timeout=3)
            return
        layers, at = self.session.layers(self.trace)
        self.app.push_screen(HeadsScreen(layers, self.head, at), self._back_from_heads)

    def action_model(self) -> None:
        if not self._shown("M"):
            return
        model = self.trace.scenario.model
        if not model or model.get("path") is None:   # a hand-written scenario, or a model in memory
            self.query_one(StatusBar).say("this scenario does not come from a checkpoint folder: there is no model "
                                          "to show (open one with --model PATH --text T, or the induction built-in)",
                                          "warning")
            return
        from .model import ModelScreen
        self.app.push_screen(ModelScreen(self.session, self.trace, self.head), self._back_from_heads)

    def _back_from_heads(self, chosen) -> None:
        if chosen is not None and self.trace is not None:
            head, trace = chosen
            if trace is not self.trace:   # a head of another layer of the model: that layer opens
                self._apply(replace(self.session, scenario=trace.scenario), trace)
                shown = "weights" if trace.scenario.linear is None else "implicit"   # what the head's tile drew
                self.go(nearest_step(trace, make_id(shown, head), shown, head))
                self.head = head
                return
            self.head = head
            step = self.trace.step(self.step_id)
            kind = step.kind if step.head is not None else "weights"
            self.go(nearest_step(self.trace, parse(step.id).with_kind(kind, head), kind, head))

    def action_help(self) -> None:
        from .help import HelpScreen
        self.app.push_screen(HelpScreen([("The cell cursor", MatrixView.BINDINGS),
                                         ("Steps, heads, arithmetic, quiz", type(self).BINDINGS),
                                         ("Quiz answer line", AnswerLine.BINDINGS),
                                         ("Everywhere", self.app.BINDINGS)]))
