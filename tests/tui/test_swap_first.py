"""Swapping the arithmetic of a large scenario shows the head on screen first, computes the other
heads in the background, and ends with every step equal to a fresh trace of the new arithmetic;
a key pressed meanwhile sees the new arithmetic's numbers."""
from __future__ import annotations

import asyncio
import threading

import numpy as np

import tracer
from tui.screens import running
from tui.screens.main import MainScreen
from tui.session import Session

from tui_helpers import opened, pilot_test, settle, status_text


async def _until(pilot, ready, timeout: float = 60.0) -> None:
    for _ in range(int(timeout / 0.02)):
        await pilot.pause()
        if ready():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the screen never got there")


def _same(trace, fresh, sid) -> None:
    np.testing.assert_array_equal(trace[sid], fresh[sid], err_msg=sid)


@pilot_test
async def test_swap_shows_the_head_first_then_every_step_of_a_fresh_trace(monkeypatch):
    monkeypatch.setattr(running, "FIRST_CELLS", 1)   # multi_head counts as large here
    monkeypatch.setattr(running, "INLINE_CELLS", 0)
    gate, armed, whole = threading.Event(), threading.Event(), Session.run

    def run(self, lazy=None):   # the background's whole run waits until the test lets it go
        if lazy is None and armed.is_set():
            gate.wait(60)
        return whole(self, lazy)
    monkeypatch.setattr(Session, "run", run)
    async with opened("multi_head", size=(120, 40)) as (app, pilot):
        screen = app.screen
        start = screen.session.preset
        armed.set()
        await pilot.press("a")
        await _until(pilot, lambda: screen.session.preset != start and screen.trace.lazy)
        fresh = tracer.run(screen.session.scenario, screen.session.preset)
        assert "background" in status_text(app)
        _same(screen.trace, fresh, screen.step_id)
        await pilot.press("n")   # mid-swap: the next step, on the new arithmetic
        await _until(pilot, lambda: not screen._loading)
        _same(screen.trace, fresh, screen.step_id)
        gate.set()
        await settle(pilot)
        assert not screen.trace.lazy and "background" not in status_text(app)
        for step in fresh.steps:
            _same(screen.trace, fresh, step.id)
        assert screen.trace.arithmetic == fresh.arithmetic


@pilot_test
async def test_a_second_swap_mid_background_ends_on_its_own_arithmetic(monkeypatch):
    monkeypatch.setattr(running, "FIRST_CELLS", 1)
    monkeypatch.setattr(running, "INLINE_CELLS", 0)
    async with opened("multi_head", size=(120, 40)) as (app, pilot):
        screen = app.screen
        start = screen.session.preset
        await pilot.press("a")
        await pilot.press("a")   # back before the first swap's background is done
        await settle(pilot)
        assert screen.session.preset == start and not screen.trace.lazy
        fresh = tracer.run(screen.session.scenario, start)
        for step in fresh.steps:
            _same(screen.trace, fresh, step.id)


@pilot_test
async def test_the_other_heads_start_once_the_swapped_head_is_drawn(monkeypatch):
    """The background's kernels hold the GIL while they run: started before the frame that shows
    the new arithmetic, they held that frame back. A frame is drawn between the two."""
    monkeypatch.setattr(running, "FIRST_CELLS", 1)
    monkeypatch.setattr(running, "INLINE_CELLS", 0)
    seen, apply, rest, frame = [], running.RunMixin._apply, running.RunMixin._rest, MainScreen._compositor_refresh
    monkeypatch.setattr(running.RunMixin, "_apply", lambda self, *a: (seen.append("shown"), apply(self, *a))[1])
    monkeypatch.setattr(running.RunMixin, "_rest", lambda self, *a: (seen.append("rest"), rest(self, *a))[1])
    monkeypatch.setattr(MainScreen, "_compositor_refresh", lambda self: (seen.append("frame"), frame(self))[1])
    async with opened("multi_head", size=(120, 40)) as (app, pilot):
        seen.clear()
        await pilot.press("a")
        await settle(pilot)
        assert "rest" in seen and "shown" in seen[:seen.index("rest")]
        after = seen[seen.index("shown"):seen.index("rest")]
        assert "frame" in after, seen
        assert not app.screen.trace.lazy


@pilot_test
async def test_a_swap_measures_what_it_shows_off_the_screens_thread(monkeypatch):
    """The colour scales of the step on view and of the panels beside it, for the head shown first
    and again for the whole trace that replaces it: measured in the workers, none on the screen's
    thread (a 1024 × 1024 array's took ~15 ms of the swap's first frame)."""
    from tui.widgets import heat
    monkeypatch.setattr(running, "FIRST_CELLS", 1)
    monkeypatch.setattr(running, "INLINE_CELLS", 0)
    made, scale = [], heat.Scale.__init__

    def measured(self, array, *a, **k):
        made.append((threading.current_thread() is threading.main_thread(), array.shape))
        scale(self, array, *a, **k)
    monkeypatch.setattr(heat.Scale, "__init__", measured)
    async with opened("multi_head", size=(120, 40)) as (app, pilot):
        await pilot.press("n", "n", "n", "n")   # h0.scores: q and k beside it
        await settle(pilot)
        made.clear()
        await pilot.press("a")
        await settle(pilot)
        assert not app.screen.trace.lazy and app.screen.step_id == "h0.scores"
        assert made and not [shape for on_screen_thread, shape in made if on_screen_thread], made
