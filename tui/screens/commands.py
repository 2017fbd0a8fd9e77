"""The command palette's commands (ctrl+p): go to any step, open any scenario (a built-in, or a
.toml path typed in), set any arithmetic key to any value (`scale=3`), and the screen's actions."""
from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

import tracer
from tracer.arithmetic import KEYS, PRESETS

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


def commands(main, query: str = "") -> list[tuple[str, str, object]]:
    """(text, help, callback) for every command the main screen offers now."""
    out = []
    trace = main.trace
    if trace is not None:
        out += [(f"go to step {s.id}", s.title, partial(main.go, s.id)) for s in trace.steps]
        if main.session is not None:
            session = main.session
            out += [(f"arithmetic preset {name}", "every key as the preset sets it",
                     partial(main.rerun, session.under(name))) for name in PRESETS]
            out += [(f"set {key}={value}", f"arithmetic: {key}", partial(main.set_option, key, value))
                     for key, values in CHOICES.items() for value in values]
    out += [(f"open scenario {name}", text, partial(main.open_scenario, name))
            for name, text in tracer.list_builtins()]
    out += [("open scenario…", "pick a built-in or type a .toml path", main.action_open),
            ("toggle fractions / decimals", "how the numbers are written", main.action_fractions),
            ("diff view", "this step under two arithmetics, side by side", main.action_diff),
            ("arithmetic settings…", "each key of the arithmetic on its own", main.action_settings),
            ("export…", "write the trace as json, npz, csv or md", main.action_export),
            ("help", "every key and what it does", main.action_help)]
    typed = query.strip()
    key, eq, value = typed.removeprefix("set ").partition("=")
    if eq and key.strip() in KEYS and value.strip():
        out.append((f"set {key.strip()}={value.strip()}", "arithmetic: as typed",
                    partial(main.set_option, key.strip(), value.strip())))
    if typed.endswith(".toml"):
        path = typed.removeprefix("open ").strip()
        out.append((f"open {path}", "a scenario file", partial(main.open_scenario, path)))
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
