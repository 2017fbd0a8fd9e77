"""The command palette's commands (ctrl+p): go to any step, open any scenario (a built-in, or a
.toml path typed in), set any arithmetic key to any value (`scale=3`), and the screen's actions."""
from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

import tracer
from tracer.arithmetic import KEYS, PRESETS

from .messages import GoTo, OpenScenario, Rerun, SetOption

# The usual values of each key; any other is reached by typing `key=value`.
CHOICES = {
    "scale": ("sqrt", "floor", "none", "2"),
    "softmax_base": ("e", "2", "3", "10"),
    "normalize": ("softmax", "relu"),
    "stable": ("true", "false"),
    "dtype": ("float64", "float32"),
    "mask": ("none", "causal"),
    "layout": ("rows", "columns"),
}


ACTIONS = [("open scenario…", "pick a built-in or type a .toml path", "open"),
           ("toggle fractions / decimals", "how the numbers are written", "fractions"),
           ("diff view", "this step under two arithmetics, side by side", "diff"),
           ("worksheet", "every matrix of this head on one sheet, filled as you step", "worksheet"),
           ("quiz", "hide the computed cells and type them in", "quiz"),
           ("heads overview", "every head's weights at a glance", "heads"),
           ("model view", "every layer and head of the checkpoint: kinds, memory, role scores", "model"),
           ("arithmetic settings…", "each key of the arithmetic on its own", "settings"),
           ("export…", "write the trace as json, npz, csv, md (a worksheet), svg or png", "export"),
           ("help", "every key and what it does", "help")]


def commands(screen, query: str = "") -> list[tuple[str, str, object]]:
    """(text, help, callback) for every command the screen offers now; each posts a message or
    runs one of the screen's actions, so this module knows no screen class."""
    out = []
    send = screen.post_message
    trace, session = getattr(screen, "trace", None), getattr(screen, "session", None)
    if trace is not None:
        out += [(f"go to step {s.id}", s.title, partial(send, GoTo(s.id))) for s in trace.steps]
        if session is not None:
            out += [(f"arithmetic preset {name}", "every key as the preset sets it",
                     partial(send, Rerun(session.under(name)))) for name in PRESETS]
            out += [(f"set {key}={value}", f"arithmetic: {key}", partial(send, SetOption(key, value)))
                    for key, values in CHOICES.items() for value in values]
    out += [(f"open scenario {name}", text, partial(send, OpenScenario(name)))
            for name, text in tracer.list_builtins()]
    out += [(text, help_text, partial(screen.run_action, action)) for text, help_text, action in ACTIONS]
    typed = query.strip()
    key, eq, value = typed.removeprefix("set ").partition("=")
    typed_set = f"set {key.strip()}={value.strip()}"
    if eq and key.strip() in KEYS and value.strip() and all(text != typed_set for text, _, _ in out):
        out.append((f"set {key.strip()}={value.strip()}", "arithmetic: as typed",
                    partial(send, SetOption(key.strip(), value.strip()))))
    if typed.endswith(".toml"):
        path = typed.removeprefix("open ").strip()
        out.append((f"open {path}", "a scenario file", partial(send, OpenScenario(path))))
    return out


class StepCommands(Provider):
    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_text, callback in commands(self.screen, query):
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), callback, text=text, help=help_text)

    async def discover(self) -> Hits:
        for text, help_text, callback in commands(self.screen):
            yield DiscoveryHit(text, callback, text=text, help=help_text)
