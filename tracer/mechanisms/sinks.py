"""Attention sinks (gpt-oss): each head has one learned logit that joins every query's softmax as
if it were the score of one more key, a key with no value. Its share of the weight goes nowhere,
so a head can attend to (almost) nothing; the tokens' weights then sum to 1 − sink. (Not to be
confused with StreamingLLM's first tokens, which the mask `streaming:S:W` keeps: masks.py.)

A scenario file writes `[weights] sinks`, one logit per head."""
from __future__ import annotations

import numpy as np

from ..checks import kind, number
from ..errors import ScenarioError
from ..printing import divisor
from ..steps.base import Kind, register
from ..steps.scores import standard
from .declaration import Mechanism, per_head


def read(scenario, data: dict) -> dict:
    """One logit per head, the score of a key no token owns."""
    value, heads = data["weights"].get("sinks"), scenario.heads
    if value is None:
        return {"sinks": None}
    if isinstance(value, np.ndarray):
        value = value.tolist()
    count = f"{heads} number{'s' if heads != 1 else ''}"
    if not isinstance(value, list):
        raise ScenarioError("weights.sinks", f"expected a list of {count} (one sink logit per head), got {kind(value)}")
    if len(value) != heads:
        raise ScenarioError("weights.sinks", f"expected {count} (one sink logit per head), got {len(value)}")
    return {"sinks": np.array([number(s, f"weights.sinks[{h}]") for h, s in enumerate(value)], dtype=np.float64)}


def refuse_relu(scenario, normalize: str, field: str = "normalize") -> None:
    """A sink is one more logit in each query's softmax. Relu weights, max(0, s), are not shared
    out: a sink would take nothing and change nothing, while its steps and lesson say it takes a
    share; so the pair is refused (it showed softmax-with-sink weights under relu's title)."""
    if scenario.sinks is not None and normalize != "softmax":
        raise ScenarioError(field, f"expected softmax with weights.sinks, got {normalize} (a sink is one more logit "
                            "in each query's softmax; relu's weights, max(0, s), are not shared out, so a sink "
                            "would take no share)")


# ------------------------------------------------------------------ the formula

def powers(s: np.ndarray, logit, stable: bool = True, base: float = np.e) -> tuple:
    """The softmax's powers with the sink's logit as one more key, in float64 NumPy (the earlier
    blocks' and the explanations'; kernels/stages.attend's beside it): (the keys' powers
    base^(s − max), the sink's base^(logit − max), the max), the max over the keys and the sink
    when stable (0 otherwise). s: … × keys (−∞ where masked); logit: a number, or one per row of s."""
    s = np.asarray(s, dtype=np.float64)
    logit = np.asarray(logit, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        shift = np.maximum(s.max(axis=-1, keepdims=True), logit) if stable else np.zeros(s.shape[:-1] + (1,))
    power = np.exp if base == np.e else (lambda x: np.power(base, x))
    return power(s - shift), power(logit - shift), shift


def sink_power(sink: float, row: np.ndarray, arithmetic) -> tuple[float, float]:
    """(the sink's power, the max subtracted) for one query's row of masked scores."""
    base = np.e if arithmetic.softmax_base == "e" else float(arithmetic.base)
    _, own, shift = powers(row, sink, arithmetic.stable, base)
    return float(own[0]), float(shift[0])


# ------------------------------------------------------------------ the step

def _base(arithmetic) -> str:
    return "e" if arithmetic.softmax_base == "e" else f"{arithmetic.base:g}"


def sink_power_text(cell) -> tuple[str, float]:
    """The head's sink's power for the cell's query, written (`3^1`, `e^(0.5 − 2)`), and its value."""
    f, s = cell.f, float(cell.scenario.sinks[cell.step.head])
    row = cell.rows(cell.trace.step(cell.sid("exp")).inputs[0])[cell.i]
    own, shift = sink_power(s, row, cell.arithmetic)
    base = _base(cell.arithmetic)
    return (f"{base}^({f(s)} − {f(shift)})" if cell.arithmetic.stable else f"{base}^{f(s)}"), own


def _explain(cell) -> str:
    f = cell.f
    power, own = sink_power_text(cell)
    s = float(cell.scenario.sinks[cell.step.head])
    total = cell.rows(cell.sid("sums"))[cell.i, 0]
    rest = 1 - cell.value
    return (f"= {power} ÷ {divisor(cell.f(total))} = {f(own)} ÷ {divisor(cell.f(total))} = {cell.fa(cell.value)}   "
            f"(head {cell.step.head}'s sink logit is {f(s)}; the keys {cell.names()[0]} sees share the other {f(rest)})")


register(Kind(
    "sink", "Sink's share", ("query", "one"), "head",
    "gpt-oss gives each head one learned logit, the score of a key that is not a token and has no "
    "value. It joins every query's softmax: its power is added to the sum, so the tokens' weights "
    "add up to 1 − sink. A head with nothing useful to read can park its weight there instead of "
    "on some token (StreamingLLM found models learn to use the first token for this).",
    formula=lambda ctx: (f"{_base(ctx.arithmetic)}^(sink − max) ÷ sums   (the max over the tokens and the sink)"
                         if ctx.arithmetic.stable else f"{_base(ctx.arithmetic)}^sink ÷ sums"),
    explain=_explain,
    sources=lambda cell: {cell.step.inputs[1]: [(cell.i, 0)]},
    inputs=lambda ctx, h: [ctx.latest(h, "logits", "exp"), ctx.sid("sums", h)],
    present=lambda ctx: ctx.dims.of("sinks") is not None and ctx.arithmetic.normalize == "softmax" and standard(ctx),
    tip="raise the base to the head's sink logit (less the max, if subtracted), then divide by the query's sum"),
    after="sums")


# ------------------------------------------------------------------ its words in the softmax's steps

def _exp_max(cell, row) -> tuple | None:
    """(the max subtracted, whose it is) when the head's sink logit is above every score of the row."""
    sink = float(cell.scenario.sinks[cell.step.head])
    if sink > row.max():
        return sink, f"the head's sink logit, above every score of {cell.names()[0]}"
    return None


def _sums_explain(cell, row: str) -> str:
    power, own = sink_power_text(cell)   # the sink's power, which h{h}.exp has no column for
    return (f"= {row} + {cell.f(own)} = {cell.fa(cell.value)}   (the {cell.sid('exp')} "
            f"{'column' if cell.trace.columns else 'row'}, plus the sink's power {power} = {cell.f(own)}, "
            f"which {cell.sid('exp')} has no cell for)")


TEXTS = {
    "exp.formula": lambda ctx, base: (f"{base}^(s − max)   (max: the largest of each query's scores and the "
                                      "head's sink logit)"),   # gpt-oss subtracts the larger of the two
    "exp.max": _exp_max,
    "exp.why": lambda ctx: (" The head's sink has a power too (base^sink), which has no column here: it is added "
                            "to each query's sum (see sums)."),
    "sums.formula": lambda ctx: " + the sink's power",
    "sums.explain": _sums_explain,
    "sums.why": lambda ctx: ("Each query's powers are added up, and the head's sink's power with them: dividing by "
                             "this sum gives the tokens' weights, which add up to 1 − the sink's share (the sink "
                             "takes the rest)."),
    "weights.why": lambda ctx: ("How much each query attends to each key: the powers divided by their sum, which "
                                "holds the sink's power too, so each query's weights add up to 1 − the sink's "
                                "share (the sink step): the part of its attention that goes to no token."),
}


# ------------------------------------------------------------------ the declaration

DECLARATION = Mechanism(
    "sinks", "sinks", field="sinks", label="weights.sinks", weight_keys=("sinks",), read=read,
    arguments={"sinks": "weights.sinks"},
    arrays=lambda sc: {"weights.sinks": sc.sinks}, describe=lambda sc: [float(s) for s in sc.sinks],
    given_words=lambda sc: (f"the sink's logit {per_head(sc.sinks)} (its power joins each query's sum; the sink's "
                            "share is that power ÷ the sum)"),
    fused=False, online=False, decode=False, arithmetic=refuse_relu, per_head={"sinks": "head"},
    checkpoint=lambda blk, cfg, layer: {} if blk.sinks is None else {"sinks": blk.sinks},
    said=lambda arrays: ("each head's sink logit joins its softmax (sink is its share; the tokens' weights sum to "
                         "1 − sink)") if "sinks" in arrays else None,
    texts=TEXTS)
