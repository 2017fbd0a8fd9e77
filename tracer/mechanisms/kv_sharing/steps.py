"""Keys and values shared across layers, as a scenario writes them: `[shared_kv]` with `source`
(the layer whose keys and values these are, in words: "layer 13"), `readers` (the query heads that
stand for the later layer that reads them; default every head but 0, or every head when `x` is
given) and `x` (what the source layer's attention read, n × d_model: the keys and values are
computed from it, the step `kv_x`). The key and value steps are titled as the source's, and a
note counts the cache once."""
from __future__ import annotations

import numpy as np

from ...checks import kind, matrix, text, unknown
from ...errors import ScenarioError
from ...ids import step_id
from ...steps.base import Kind, register

KEYS = ("source", "readers", "x")


def read(scenario, data: dict) -> dict:
    value = data.get("shared_kv")
    if value is None:
        return {"shared_kv": None}
    if not isinstance(value, dict):
        raise ScenarioError("shared_kv", f"expected a table with source (the layer whose keys and values these are), "
                            f"got {kind(value)}")
    unknown(value, KEYS, "shared_kv.")
    if scenario.context is not None or scenario.mla is not None:
        raise ScenarioError("shared_kv", "expected self-attention without [mla] (a later layer reads an earlier "
                            "layer's keys and values of the same tokens)")
    source = text(value, "source", "")
    if not source:
        raise ScenarioError("shared_kv.source", "missing; expected the source layer in words (\"layer 13\")")
    x = None
    if value.get("x") is not None:
        x = matrix(value["x"], "shared_kv.x")
        x = x.T if scenario.layout == "columns" else x
        if x.shape != (scenario.n, scenario.d_model):
            want = (scenario.n, scenario.d_model) if scenario.layout == "rows" else (scenario.d_model, scenario.n)
            raise ScenarioError("shared_kv.x", f"expected a {want[0]} × {want[1]} matrix (the source layer's input "
                                "for the same tokens), got " + " × ".join(map(str, x.shape[::1 if scenario.layout == 'rows' else -1])))
    every = list(range(scenario.heads))
    readers = value.get("readers", every if x is not None or scenario.heads == 1 else every[1:])
    if isinstance(readers, np.ndarray):
        readers = readers.tolist()
    if not isinstance(readers, (list, tuple)) or not readers or len(set(readers)) != len(readers) or any(
            isinstance(h, bool) or not isinstance(h, (int, np.integer)) or not 0 <= h < scenario.heads for h in readers):
        raise ScenarioError("shared_kv.readers", f"expected a list of different heads from 0 to {scenario.heads - 1} "
                            f"(those that stand for the reading layer), got {kind(readers)}")
    return {"shared_kv": {"source": source, "readers": tuple(int(h) for h in readers), "x": x}}


# ------------------------------------------------------------------ titles and notes

def heading(ctx, kind) -> str:
    """A key or value step's title under shared KV: the source layer's."""
    shared = ctx.dims.of("kv_sharing")
    if shared is None or kind.scope != "kv":
        return ""
    every = len(shared[1]) == ctx.dims.heads   # every head reads them: the traced layer computes none
    return f"{kind.title} of {shared[0]}, shared" + (": this layer computes none" if every else "")


def note(trace, step) -> str | None:
    """Whose keys and values a step reads, and the cache that sharing them saves, counted once."""
    sc = trace.scenario
    spec = sc.shared_kv
    if spec is None or (step.head is None and step.group is None):
        return None
    width, groups = sc.d_k + sc.d_v, sc.groups
    own = groups * sc.m * width
    kv = ", ".join(f"{step_id('k', group=g)}, {step_id('v', group=g)}" if sc.groups < sc.heads else
                   f"{step_id('k', g)}, {step_id('v', g)}" for g in range(groups))
    each = f"{groups} key/value head{'s' * (groups > 1)} × {sc.m} tokens × (d_k + d_v = {width}) = {own} numbers"
    if len(spec["readers"]) == sc.heads:
        return (f"This layer reads {spec['source']}'s keys and values ({kv}): it computes none and keeps no KV cache; "
                f"without sharing it would keep {each}.")
    heads = ("Head " if len(spec["readers"]) == 1 else "Heads ") + ", ".join(map(str, spec["readers"]))
    return (f"{heads} stand{'s' * (len(spec['readers']) == 1)} for a later layer that reads {spec['source']}'s keys and values ({kv}) and keeps "
            f"no cache: the two layers keep {own} numbers, against {2 * own} if the later one kept its own ({each} "
            f"each): 2× smaller; each new token adds {groups * width} numbers instead of {2 * groups * width}.")


# ------------------------------------------------------------------ the step kv_x

register(Kind(
    "kv_x", "What the source layer's attention read", ("token", "d_model"), "input",
    "A layer that shares keys and values computes none: they are the source layer's, projected from "
    "what that layer's attention read (its own normed input), not from this layer's x.",
    formula=lambda ctx: f"X of {ctx.dims.of('kv_sharing')[0]}: one {'column' if ctx.columns else 'row'} per token",
    explain=lambda cell: (f"= {cell.f(cell.value)}   (what {cell.scenario.shared_kv['source']}'s attention read: "
                          f"token {cell.token(cell.i)}, feature {cell.j})"),
    sources=lambda cell: {}, inputs=lambda ctx, h: [],
    present=lambda ctx: ctx.dims.of("kv_sharing") is not None and ctx.dims.of("kv_sharing")[2]), after="x")
