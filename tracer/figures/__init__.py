"""Pictures of a trace for slides and papers (SVG, PNG): a heatmap per step, a head's worksheet,
or a lines figure of the attention weights. matplotlib is needed only when one is drawn.

    from tracer.figures import write_figure
    write_figure(tracer.run("by_hand"), "weights.svg", steps=["h0.weights"])
"""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import ScenarioError
from ..writing import refuse_an_input, selected_steps
from ..ids import step_id
from .common import PICTURES

KINDS = ("heatmap", "worksheet", "lines", "model")   # model: a whole model (figures/model.py), not a trace
MOST_HEADS = {"heatmap": 4, "lines": 8}   # with no --step: the weights of at most this many heads


def picture_format(path, fmt_name: str | None = None) -> str:
    """svg or png: the format asked for, or the one PATH's extension names."""
    name = (fmt_name or Path(path).suffix.lstrip(".")).lower()
    if name not in PICTURES:
        what = f"--format {fmt_name!r}" if fmt_name else f"the extension of {os.fspath(path)!r}"
        raise ScenarioError("--format", f"expected svg or png for a picture, got {what}")
    return name


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ScenarioError("--figure", f"expected one of {', '.join(KINDS)}, got {kind!r}")
    return kind


def write_figure(trace, path, steps=None, kind: str = "heatmap", blank: bool = False,
                 fmt: str | None = None) -> Path:
    """Draws `kind` for the chosen step ids (default: see each kind) and writes it to `path`
    atomically, as SVG (text kept as text) or PNG; returns the path."""
    check_kind(kind)
    name = picture_format(path, fmt)
    refuse_an_input(path, trace.scenario)
    chosen = selected_steps(trace, steps) if steps else None
    from . import common
    common.render(builder(trace, chosen, kind, blank), path, name)
    return Path(path)


def figure_svg(trace, steps=None, kind: str = "heatmap", blank: bool = False) -> str:
    """The same figure as `write_figure` draws, as SVG text (nothing written)."""
    check_kind(kind)
    from . import common
    return common.svg_text(builder(trace, selected_steps(trace, steps) if steps else None, kind, blank))


def builder(trace, chosen, kind: str, blank: bool):
    """The function that draws `kind` of the chosen steps (checked first) on a matplotlib Figure."""
    if kind == "heatmap":
        from . import heatmap
        chosen = chosen or default_weights(trace, MOST_HEADS[kind])
        return lambda Figure: heatmap.draw(trace, chosen, Figure)
    if kind == "model":
        raise ScenarioError("--figure", "model draws a whole model, not a trace; expected attnsim export --model PATH "
                            "--text T --figure model, or tracer.model_view(...).save(path)")
    if kind == "worksheet":
        from . import worksheet
        head = next((s.head for s in chosen or [] if s.head is not None), 0)
        worksheet.check(trace, head)
        return lambda Figure: worksheet.draw(trace, head, blank, Figure)
    from . import lines
    chosen = chosen or default_weights(trace, MOST_HEADS[kind])
    lines.check(trace, chosen)
    return lambda Figure: lines.draw(trace, chosen, Figure)


def default_weights(trace, most: int) -> list:
    """The attention weights of the first `most` heads (a linear layer's: the implicit weights)."""
    kind = "weights" if step_id("weights", 0) in trace else "implicit"
    return [trace.step(step_id(kind, h)) for h in range(min(trace.scenario.heads, most))]


def describe(trace, steps=None, kind: str = "heatmap") -> str:
    """A few words on what a figure shows: `heatmap of h0.weights`, `worksheet of head 1`."""
    chosen = selected_steps(trace, steps) if steps else None
    if kind == "worksheet":
        head = next((s.head for s in chosen or [] if s.head is not None), 0)
        return f"worksheet of head {head}"
    ids = [s.id for s in chosen or default_weights(trace, MOST_HEADS[kind])]
    return f"{kind} of {', '.join(ids[:6])}" + (f" and {len(ids) - 6} more" if len(ids) > 6 else "")
