"""Soft-capping (Gemma 2): each scaled score squashed into (−C, C) by C·tanh(s / C), before the
mask, so that no single key can take all of a query's attention however large its score.

A scenario file writes `softcap = C`; a checkpoint's config.json `attn_logit_softcapping`."""
from __future__ import annotations

import math
import numbers

import numpy as np

from ..checks import kind, number, positive
from ..errors import ScenarioError
from ..steps.base import Kind, register
from ..steps.scores import standard
from .declaration import Mechanism


def read(scenario, data: dict) -> dict:
    """C of C·tanh(s / C): a number > 0."""
    value = data.get("softcap")
    if value is None:
        return {"softcap": None}
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ScenarioError("softcap", f"expected a number C > 0 (scores become C·tanh(s / C)), got {kind(value)}")
    cap = number(value, "softcap")
    if cap <= 0:
        raise ScenarioError("softcap", f"expected a number C > 0 (scores become C·tanh(s / C)), got {kind(value)}")
    return {"softcap": cap}


def capped(s: np.ndarray, cap: float) -> np.ndarray:
    """C·tanh(s ÷ C) in NumPy: the NumPy twin's and the earlier blocks' (kernels/stages.soft_cap's)."""
    return cap * np.tanh(s / cap)


# ------------------------------------------------------------------ the step

def _explain(cell) -> str:
    cap, f = cell.scenario.softcap, cell.f
    s = float(cell.rows(cell.step.inputs[0])[cell.i, cell.j])
    t = s / cap
    where = ("nearly unchanged: tanh is almost a straight line near 0" if abs(t) < 0.3
             else f"squashed toward {'−' if s < 0 else ''}{cap:g}" if abs(t) > 1.5 else "bent toward the cap")
    return (f"= {cap:g}·tanh({f(s)} ÷ {cap:g}) = {cap:g}·tanh({t:.4g}) = {cap:g}·{math.tanh(t):.4g} = "
            f"{cell.value:.4g}   ({where})").replace("-", "−")


def _formula(ctx) -> str:
    cap = ctx.dims.of("softcap")
    return f"{cap:g}·tanh(s ÷ {cap:g})   (C = {cap:g})"


register(Kind(
    "capped", "Soft-capped scores", ("query", "key"), "head",
    "Gemma 2 caps its scores smoothly: C·tanh(s / C) is close to s when s is small and never beyond ±C. "
    "A key whose score runs away cannot take all of a query's weight, which keeps training stable; "
    "the order of the scores is unchanged.",
    formula=_formula, explain=_explain, sources=lambda cell: {cell.step.inputs[0]: [(cell.i, cell.j)]},
    inputs=lambda ctx, h: [ctx.latest(h, "logits", "capped")],
    present=lambda ctx: ctx.dims.of("softcap") is not None and standard(ctx), chain="logits",
    tip="divide by the cap, take tanh (a calculator's), multiply by the cap again"), after="scaled")


# ------------------------------------------------------------------ the declaration

def _config(data: dict, family) -> float | None:
    """config.json's cap (`attn_logit_softcapping` for Gemma 2), when the family has one."""
    return positive(data, family.softcap)


DECLARATION = Mechanism(
    "softcap", "soft-capping", field="softcap", label="softcap", keys=("softcap",), read=read,
    arguments={"softcap": "softcap"},
    dims=lambda sc: sc.softcap, describe=lambda sc: sc.softcap,
    given_words=lambda sc: f"the cap C = {sc.softcap:g}",
    unfillable=lambda sc: (f"soft-capping takes C·tanh(s ÷ C) (C = {sc.softcap:g}), and tanh of any fraction but 0 "
                           "is no fraction: only scores of 0 would do, and every query's weights would be equal"),
    fused=False, online=False, decode=False, config=_config,
    checkpoint=lambda blk, cfg, layer: {} if cfg.parts.get("softcap") is None else {"softcap": cfg.parts["softcap"]},
    said=lambda arrays: (f"capped is {arrays['softcap']:g}·tanh(scaled ÷ {arrays['softcap']:g})"
                         if "softcap" in arrays else None))
