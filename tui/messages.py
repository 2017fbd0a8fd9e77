"""The messages the TUI's parts send each other (dataclasses): a finished trace, a compile notice,
an error, and the requests the palette and dialogs make of the main screen."""
from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


@dataclass
class Loaded(Message):
    """A worker finished: this session's trace is ready to show."""
    session: object
    trace: object
    rest: bool = False   # only the head on screen is computed yet: the rest follows in the background


@dataclass
class Completed(Message):
    """The rest of a trace shown first lazily (the head on screen computed first) is ready:
    the same session, every step computed."""
    session: object
    trace: object


@dataclass
class Compiling(Message):
    text: str


@dataclass
class Failed(Message):
    error: str
    fallback: bool   # nothing open yet: open the classroom example instead


@dataclass
class GoTo(Message):
    step_id: str


@dataclass
class OpenScenario(Message):
    spec: str


@dataclass
class SetOption(Message):
    key: str
    value: object


@dataclass
class Rerun(Message):
    """Run the same scenario under another session (another preset or keys)."""
    session: object
