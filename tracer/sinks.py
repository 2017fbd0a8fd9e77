"""Attention sinks (gpt-oss): each head has one learned logit that joins every query's softmax as
if it were the score of one more key, a key with no value. Its share of the weight goes nowhere,
so a head can attend to (almost) nothing; the tokens' weights then sum to 1 − sink."""
from __future__ import annotations

import numpy as np

from .errors import ScenarioError


def refuse_relu(scenario, normalize: str, field: str = "normalize") -> None:
    """A sink is one more logit in each query's softmax. Relu weights, max(0, s), are not shared
    out: a sink would take nothing and change nothing, while its steps and lesson say it takes a
    share; so the pair is refused (it showed softmax-with-sink weights under relu's title)."""
    if scenario.sinks is not None and normalize != "softmax":
        raise ScenarioError(field, f"expected softmax with weights.sinks, got {normalize} (a sink is one more logit "
                            "in each query's softmax; relu's weights, max(0, s), are not shared out, so a sink "
                            "would take no share)")


def with_sink(masked: np.ndarray, v: np.ndarray, sink: float, arithmetic) -> dict:
    """The softmax of one head's masked scores (query × key) with the sink's logit as one more
    column: powers base^(s − max) (the max over the tokens and the sink, when stable), sums that
    include the sink's power, the tokens' weights, the sink's share of each query, and z."""
    dt = masked.dtype
    m = masked.astype(np.float64)
    shift = np.maximum(m.max(axis=1, keepdims=True), sink) if arithmetic.stable else np.zeros((m.shape[0], 1))
    base = np.e if arithmetic.softmax_base == "e" else float(arithmetic.base)
    with np.errstate(all="ignore"):
        e = np.power(base, m - shift) if base != np.e else np.exp(m - shift)
        e[np.isneginf(m)] = 0.0
        own = np.power(base, sink - shift) if base != np.e else np.exp(sink - shift)
        sums = e.sum(axis=1, keepdims=True) + own
        weights = e / sums
    return {"exp": e.astype(dt), "sums": sums.astype(dt), "weights": weights.astype(dt),
            "sink": (own / sums).astype(dt), "z": (weights @ v.astype(np.float64)).astype(dt)}


def sink_power(sink: float, row: np.ndarray, arithmetic) -> tuple[float, float]:
    """(the sink's power, the max subtracted) for one query's row of masked scores."""
    finite = row[row > -np.inf]
    shift = max(float(finite.max()) if finite.size else -np.inf, sink) if arithmetic.stable else 0.0
    base = np.e if arithmetic.softmax_base == "e" else float(arithmetic.base)
    return float(base ** (sink - shift)), shift
