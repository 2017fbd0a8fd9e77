"""Numbers that leave the dtype's range are errors that name the step and the cell, never a
silent inf, NaN or 0 ÷ 0; inputs too large for a narrower dtype are named as inputs."""
from __future__ import annotations

import numpy as np

from .errors import ScenarioError
from .ids import step_id
from .steps.base import hider


def overflow(trace, steps) -> None:
    """Names the first step whose values left the dtype's range."""
    for step in steps:
        a = trace.rows(step.id)
        may_be_minus_inf = step.kind == "masked" or step.key in ("blk_scores", "blk_max")  # masked, or nothing seen yet
        bad = np.isnan(a) | (a == np.inf) | ((a == -np.inf) & (not may_be_minus_inf))
        if bad.any():
            r, c = np.argwhere(bad)[0]
            value = a[r, c]
            if trace.columns:  # say where it is as the layout writes it
                r, c = c, r
            hint = ("raw powers overflow: set stable=true (subtract each query's max first) or scale the "
                    "scores down" if step.kind in ("exp", "sums") else "expected inputs small enough for this dtype")
            raise ScenarioError(step.id, f"a value leaves {trace.dtype.name}'s range at [{r}, {c}] "
                                f"({value}); {hint}", trace.scenario.source)
    raise ScenarioError("trace", "a value leaves the dtype's range", trace.scenario.source)


def underflow(trace, h: int, sums: np.ndarray) -> None:
    """Raw powers that are all 0 for a query that may attend something would pass for a masked
    query (zero weights) when they are really 0 ÷ 0; raw powers whose largest is subnormal (below
    the dtype's smallest normal number) have lost significant bits, and so have the weights
    divided by them (2/3 and 1/3 for 3/4 and 1/4): both are errors naming the step and the cell."""
    if trace.arithmetic.stable:
        return
    info = np.finfo(trace.dtype)
    if sums.min() >= info.tiny * sums.shape[0] * 2:   # the usual case, one comparison: every largest power is normal
        return
    may = np.ones(len(sums), bool) if trace.allowed is None else trace.allowed.any(axis=1)
    hides = hider(trace.scenario)   # an additive mask's −∞ hides keys too (mechanisms/score_bias.py)
    if hides is not None:
        may &= ~hides(trace, h).all(axis=1)
    lost = np.flatnonzero((sums[:, 0] == 0) & may)
    if lost.size:
        raise ScenarioError(step_id("exp", h), f"every raw power of query {trace.scenario.tokens[lost[0]]} "
                            f"underflows to 0 in {trace.dtype.name}, so its weights would be 0 ÷ 0; expected "
                            "stable=true (subtract each query's max first) or larger scores", trace.scenario.source)
    suspects = np.flatnonzero((sums[:, 0] < info.tiny * sums.shape[0] * 2) & may)   # else the largest is normal
    if not suspects.size:
        return
    powers = trace.rows(step_id("exp", h))
    largest = powers[suspects].max(axis=1)
    faint = np.flatnonzero(largest < info.tiny)
    if faint.size:
        q = suspects[faint[0]]
        k = int(np.argmax(powers[q]))
        r, c = (k, q) if trace.columns else (q, k)
        bits = max(0, int(np.floor(np.log2(largest[faint[0]] / info.smallest_subnormal))) + 1)
        raise ScenarioError(step_id("exp", h), f"the raw powers of query {trace.scenario.tokens[q]} are all "
                            f"subnormal in {trace.dtype.name} (the largest, {largest[faint[0]]:.3g} at [{r}, {c}], "
                            f"keeps {bits} of {info.nmant + 1} significant bits), so its weights lose precision; "
                            "expected stable=true (subtract each query's max first) or larger scores",
                            trace.scenario.source)


def check_fits(scenario, dtype: np.dtype) -> None:
    """Inputs too large for a narrower dtype are named as inputs, not as the step they break."""
    if dtype.itemsize >= 8:
        return
    largest = float(np.finfo(dtype).max)
    for field, biggest in scenario.largest.items():
        if biggest > largest:
            raise ScenarioError(field, f"a value ({biggest:.3g}) does not fit in {dtype.name} "
                                f"(largest {largest:.3g}); expected float64 (--set dtype=float64) or smaller inputs",
                                scenario.source)
