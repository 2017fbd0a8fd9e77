"""Helpers for the TUI tests: open the app at a pinned size and wait until a trace is on screen,
read what the screen and a matrix view draw, and two small scenario files."""
from __future__ import annotations

import asyncio
import functools
import os
import subprocess
import sys
import time
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from textual.worker import WorkerCancelled

from tui.app import AttnApp


def pilot_test(fn):
    """Runs an async test in its own event loop (no pytest async plugin needed)."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))
    return run


async def settle(pilot, timeout: float = 180.0) -> None:
    """Waits for the tracer's workers, the messages they post and the frames they ask for."""
    app = pilot.app

    def settled() -> bool:
        screen = app.screen   # and no frame pending: a resize lays out, then fits, then lays out again
        drawn = not (screen._layout_required or screen._dirty_widgets or screen._callbacks)
        return drawn and not app.workers._workers and getattr(screen, "trace", True) is not None

    for _ in range(int(timeout / 0.02)):
        await pilot.pause()
        try:
            await app.workers.wait_for_complete()
        except WorkerCancelled:   # done: e.g. a dialog's worker that dismissed its dialog, cancelled as it went
            pass
        await pilot.pause()   # what the workers posted, and what waits for the refresh (call_after_refresh)
        if settled():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the trace never appeared")


async def until(pilot, condition, timeout: float = 10.0) -> bool:
    """Whether `condition()` came true within `timeout` seconds of the app running: for what the app
    does a moment after a key, as a person sees it (the scroll that brings a focused tile into sight
    waits for the next refresh, then glides)."""
    for _ in range(int(timeout / 0.02)):
        if condition():
            return True
        await pilot.pause(0.02)
    return condition()


@asynccontextmanager
async def opened(*args, size=(100, 30)):
    app = AttnApp(*args)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        yield app, pilot


def drawn(view) -> list[list[str]]:
    """The words of each line the matrix view draws now (line 0: the column labels)."""
    return [view.render_line(y).text.split() for y in range(view.scrollable_content_region.height)]


def screen_text(app) -> str:
    """Everything on screen now, as plain text lines (what a person would read)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def status_text(app) -> str:
    from tui.widgets.status import StatusBar
    return str(app.screen.query_one(StatusBar).render())


async def go_to(pilot, step_id: str) -> None:
    """Shows a step (the `n` key itself is tested on its own; this is quicker than pressing it)."""
    pilot.app.screen.go(step_id)
    await settle(pilot)
    assert pilot.app.screen.step_id == step_id


TWO_HEADS = """
layout = "rows"
mask = "causal"
tokens = ["the", "cat", "sat"]
x = [[1, 0], [0, 1], [1, 1]]
[weights]
q = [[[1, 0], [0, 1]], [[0, 1], [1, 0]]]
k = [[[1, 0], [0, 1]], [[1, 1], [0, 1]]]
v = [[[1, 0], [0, 1]], [[2, 0], [0, 2]]]
"""

BROKEN = """
x = [[1, 2], [3]]
[weights]
q = [[1]]
k = [[1]]
v = [[1]]
"""


def tmux(server: str, *args: str) -> str:
    """A tmux command on a server of the test's own: tests running side by side (pytest-xdist)
    never share one, so one ending its last session cannot stop another's as it starts."""
    return subprocess.run(["tmux", "-L", server, *args], capture_output=True, text=True, timeout=30).stdout


class Terminal:
    """A tmux session running attnsim, as a person at a real terminal would."""

    def __init__(self, server: str):
        self.server = server

    def send(self, *keys: str) -> None:
        tmux(self.server, "send-keys", "-t", "attnsim", *keys)

    def wait_for(self, text, timeout: float = 120) -> str:
        """The screen (its words, one space apart) once it shows `text` (or any of a tuple of texts)."""
        screen = self.shows(text, timeout)
        if screen is None:
            raise AssertionError(f"never saw {text!r}:\n{self.screen()}")
        return screen

    def shows(self, text, timeout: float) -> str | None:
        """wait_for(), or None when `text` is not shown within `timeout` seconds."""
        end = time.time() + timeout
        texts = (text,) if isinstance(text, str) else text
        while True:
            screen = self.screen()
            if any(t in screen for t in texts):
                return screen
            if time.time() > end:
                return None
            time.sleep(0.3)

    def screen(self) -> str:
        return " ".join(tmux(self.server, "capture-pane", "-p", "-t", "attnsim").split())


@contextmanager
def terminal(name: str, *argv: str, size=(120, 36)):
    """`attnsim ARGV` from this checkout in a tmux session of `size`, on a tmux server of its own,
    killed at the end."""
    root = Path(__file__).resolve().parents[2]
    server = f"attnsim-{name}-{os.getpid()}-{time.monotonic_ns()}"
    command = " ".join([f"env PYTHONPATH={root}", sys.executable, "-m", "tui", *argv])
    tmux(server, "new-session", "-d", "-s", "attnsim", "-x", str(size[0]), "-y", str(size[1]), command)
    try:
        yield Terminal(server)
    finally:
        tmux(server, "kill-server")
