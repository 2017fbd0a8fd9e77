"""The main screen's runs of the tracer: opening a scenario, re-running it under other arithmetic,
and computing a lazy head's step, at once when small and known, else in a worker."""
from __future__ import annotations

from textual import work
from textual.worker import get_current_worker

import tracer

from ..messages import Compiling, Completed, Failed, Loaded, OpenScenario, Rerun, SetOption
from ..session import Session, carry_cell, nearest_step, one_line, run_kind
from ..widgets.heat import measure
from ..widgets.status import StatusBar
from ..widgets.worksheet import Worksheet

INLINE_CELLS = 1 << 16   # re-runs this small happen at once; larger ones in a worker
FIRST_CELLS = 1 << 20    # re-runs this large show the head on screen first, the other heads after
_seen: set = set()       # kinds of run done in this process; a new kind may compile kernels (seconds)


class RunMixin:
    """Mixed into MainScreen (which owns session, trace, step_id, head, cell, show_step, quiz_loaded)."""

    def on_compiling(self, message: Compiling) -> None:
        if self._loading:  # a notice that arrives after the run it was about is stale
            self.query_one(StatusBar).say(message.text, "busy")

    def load(self, make, fallback: bool = False, inline: bool = False, what: str = "tracing") -> None:
        """Runs `make()` → Session, then the trace: at once when `inline` (small, and a kind of run
        already done, so nothing compiles), else in a worker with a message on screen."""
        self._what, self._loading = what, True
        self.workers.cancel_group(self, "rest")   # a background rest of the last run is stale now
        if inline:
            try:
                session = make()
                self._apply(session, session.run())
            except Exception as err:  # noqa: BLE001  bad input must never end the app
                self._fail(one_line(err), fallback)
            return
        self.query_one(StatusBar).say(f"{what}…", "busy")
        self.query_one("#work").loading = self.trace is None
        self._work(make, fallback)

    @work(thread=True, exclusive=True, group="trace")
    def _work(self, make, fallback: bool) -> None:
        try:
            session = make()
            same = self.trace is not None and self.trace.scenario is session.scenario
            first = same and session.cells() >= FIRST_CELLS and not self.trace.lazy
            trace = session.run(lazy=True if first else None)   # first: plans only, heads on demand
            if trace.lazy and same:  # the step on view is kept: compute its head now, off the screen's thread
                self._measure(trace, nearest_step(trace, self.step_id, self._kind(), self.head))
            _seen.add(run_kind(session))
            message = Loaded(session, trace, rest=first)
        except Exception as err:  # noqa: BLE001
            message = Failed(one_line(err), fallback)
        if not get_current_worker().is_cancelled:
            self.post_message(message)

    def on_loaded(self, message: Loaded) -> None:
        self._apply(message.session, message.trace)
        if message.rest:
            self.query_one(StatusBar).say("computing the other heads in the background…", "busy")
            # once the new arithmetic is on screen: the rest's kernels hold the GIL while they run,
            # and started at once they held back that frame (40–100 ms on a GPT-2-size swap)
            self.call_after_refresh(self._rest_of, message.session)

    def _rest_of(self, session: Session) -> None:
        if session is self.session and self.trace is not None and self.trace.lazy:   # else a newer run came
            self._rest(session)

    @work(thread=True, exclusive=True, group="rest")
    def _rest(self, session: Session) -> None:
        """The whole trace of a session shown lazily first; the step on screen measured for
        drawing here too, so that the swap to it costs the screen nothing it can see."""
        try:
            trace = session.run()
        except Exception as err:  # noqa: BLE001
            self.post_message(Failed(one_line(err), False))
            return
        if trace.lazy or get_current_worker().is_cancelled:
            return
        if self.step_id in trace:
            self._measure(trace, self.step_id)
        self.post_message(Completed(session, trace))

    def _measure(self, trace, step_id: str) -> None:
        """Computes `step_id` and measures the colour scales of what showing it draws (the step
        and the panels beside it), here in a worker: on the screen's thread they held back the
        frame of a swap (a 1024 × 1024 array's scale and printing: ~15 ms). A guess from the cell
        on view: whatever it misses is measured when shown."""
        shown = trace[step_id]
        try:
            measure([*self.panel_arrays(trace, trace.step(step_id)), shown], self.written_fractions(trace),
                    self._tol(trace))
        except Exception:  # noqa: BLE001  only a head start: the screen measures again when it shows them
            pass

    def on_completed(self, message: Completed) -> None:
        if message.session is not self.session or not (self.trace and self.trace.lazy):
            return   # another run came since: this one is stale
        self.trace = message.trace
        self.query_one(StatusBar).say("")
        self.show_step(self.step_id if self.step_id in self.trace else "x", self.cell)
        self.call_after_refresh(self.app.keep_what_is_alive)

    def on_failed(self, message: Failed) -> None:
        self._fail(message.error, message.fallback)

    def _fail(self, error: str, fallback: bool) -> None:
        self._loading = False
        self.query_one("#work").loading = False
        what = getattr(self, "_what", "opening")
        title = "could not open" if what.startswith("opening") else "could not apply that setting"
        self.notify(error, title=title, severity="error", timeout=8)
        if self.trace is None and fallback:  # nothing open yet: fall back to the classroom example
            self._note = f"{error} (opened by_hand instead)"
            self.load(lambda: Session.open("by_hand"), what="opening by_hand")
        else:
            self.query_one(StatusBar).say(error, "error")

    def _kind(self) -> str:
        return self.trace.step(self.step_id).kind if self.trace and self.step_id in self.trace else "x"

    def _apply(self, session: Session, trace: tracer.Trace) -> None:
        """Shows a new trace: the same step (or the nearest) and the same cell when only the
        arithmetic changed; the first step of a newly opened scenario."""
        old = self.trace
        if old is not None and old.scenario is session.scenario:
            step_id = nearest_step(trace, self.step_id, self._kind(), self.head)
            cell = carry_cell(self.cell, trace.step(step_id).shape, old.layout != trace.layout)
        else:
            step_id, cell, self.head = "x", (0, 0), 0
            self.query_one(Worksheet).release()  # nothing of the previous scenario stays held
        self.session, self.trace = session, trace
        self._loading = False
        self.query_one("#work").loading = False
        self.query_one(StatusBar).say(self._note, "error")
        self._note = ""
        step_id, cell = self.quiz_loaded(old, step_id, cell)
        self.show_step(step_id, cell)
        self.call_after_refresh(self.app.keep_what_is_alive)

    # ------------------------------------------------------------ a step of a lazy head
    def go(self, step_id: str, cell: tuple[int, int] | None = None) -> None:
        if self.trace is None or step_id not in self.trace:
            return
        if self.trace.lazy:  # the head may need computing: off the screen's thread
            self.query_one(StatusBar).say(f"computing {step_id}…", "busy")
            self._loading = True
            self._fetch(self.trace, step_id, cell)
            return
        self.show_step(step_id, cell)

    @work(thread=True, exclusive=True, group="fetch")
    def _fetch(self, trace, step_id: str, cell) -> None:
        try:
            trace[step_id]
        except Exception as err:  # noqa: BLE001
            self.post_message(Failed(one_line(err), False))
            return
        now = self.trace   # the whole trace may have replaced a lazy one meanwhile: the key still counts
        if not get_current_worker().is_cancelled and now is not None and (
                trace is now or (trace.scenario is now.scenario and trace.lazy and step_id in now)):
            self.app.call_from_thread(self._fetched, step_id, cell)

    def _fetched(self, step_id: str, cell) -> None:
        self._loading = False
        self.query_one(StatusBar).say("")
        self.show_step(step_id, cell)

    # ------------------------------------------------------------ re-runs and other scenarios
    def on_open_scenario(self, message: OpenScenario) -> None:
        self.open_scenario(message.spec)

    def on_set_option(self, message: SetOption) -> None:
        self.set_option(message.key, message.value)

    def on_rerun(self, message: Rerun) -> None:
        self.rerun(message.session)

    def rerun(self, session: Session) -> None:
        if session is None or self.session is None:
            return
        try:
            inline = session.cells() <= INLINE_CELLS and run_kind(session) in _seen
        except tracer.ScenarioError:  # a bad value: the worker reports it like any other error
            inline = False
        self.load(lambda: Session.open(session.scenario, session.preset, session.overrides), inline=inline,
                  what=f"running {session.label()}")

    def set_option(self, key: str, value) -> None:
        self.rerun(self.session.with_option(key, value))

    def open_scenario(self, spec) -> None:
        if spec:
            self.load(lambda: Session.open(spec), what=f"opening {spec}")
