"""Short notes about a step that depend on the layer around it (which group a head reads, what
sharing keys and values saves), in numbers for the scenario at hand; shown beside the step."""
from __future__ import annotations

from .ids import step_id
from .mechanisms.kv_sharing.steps import note as shared_note


def sharing(trace, step) -> str | None:
    """Grouped- or multi-query attention, told for this step: whose keys and values it reads, and how
    much smaller the KV cache is than with one key/value head per query head."""
    sc = trace.scenario
    heads, groups = sc.heads, sc.groups
    if sc.shared_kv is not None:   # keys and values of another layer: their cache counted once
        return shared_note(trace, step)
    if groups == heads or (step.head is None and step.group is None):
        return None
    per = heads // groups
    g = step.group if step.group is not None else step.head // per
    readers = ", ".join(str(h) for h in range(g * per, (g + 1) * per))
    width = sc.d_k + sc.d_v
    shared, full = groups * sc.m * width, heads * sc.m * width
    who = f"group {g} ({step_id('k', group=g)}, {step_id('v', group=g)}) is read by heads {readers}"
    return (f"{who}. KV cache: {groups} group{'s' * (groups > 1)} × {sc.m} tokens × (d_k + d_v = {width}) = "
            f"{shared} numbers, against {full} with a key/value head per query head: "
            f"{heads // groups}× smaller (H/G = {heads}/{groups}).")


def notes(trace, step) -> list[str]:
    """Every note that applies to this step."""
    return [n for n in (sharing(trace, step),) if n]
