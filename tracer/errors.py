"""The one exception bad input may raise, and the warning for degenerate but valid cases.

A message is always one printable line, however hostile the file name or field it quotes.
"""
from __future__ import annotations

import re

# C0 and C1 controls (terminal escapes), line separators, the bidi controls that reorder what
# follows them on screen (U+202A–E, U+2066–9: a name could show a forged mark), and lone
# surrogates (a non-UTF-8 file name)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
MAX_PART = 300  # characters of one part of a message (a huge quoted value would flood the terminal)


def one_line(text: str, limit: int = MAX_PART) -> str:
    """text with control characters, bidi controls and lone surrogates escaped (\\n, \\x00,
    \\u202e, \\udcff) and cut to `limit` characters."""
    text = _CONTROL.sub(lambda m: repr(m.group())[1:-1], str(text))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def as_text(text: str) -> str:
    """A string any encoder takes: a non-UTF-8 file name's bytes as \\xff, other lone surrogates
    as \\udXXX (only the file system and from_arrays can hand them over)."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


class ScenarioError(ValueError):
    """Bad input: the message names the file (when there is one), the field and what was expected."""

    def __init__(self, field: str, expected: str, source: str | None = None):
        self.field, self.expected, self.source = field, expected, source
        where = f"{one_line(source)}: " if source else ""
        super().__init__(f"{where}{one_line(field)}: {one_line(expected, 3 * MAX_PART)}")

    def at(self, source: str) -> "ScenarioError":
        """The same error, now naming the file it came from."""
        return self if self.source else ScenarioError(self.field, self.expected, source)


class AttentionWarning(UserWarning):
    """Valid input with a surprising result, e.g. a query whose keys are all masked."""
