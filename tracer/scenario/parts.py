"""The optional parts of a layer, each read and checked on its own: biases, the pre-attention norm,
the context of cross-attention, the residual connection (the mechanisms of today's checkpoints,
rotary positions among them: tracer/mechanisms)."""
from __future__ import annotations

import numpy as np

from ..checks import choice, kind, labels, matrix, number, unknown, vectors
from ..errors import ScenarioError

NORM_KEYS = ("kind", "gain", "bias", "eps")


def norm_in(value, d_model: int) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ScenarioError("norm_in", f"expected a table with kind, gain, bias and eps, got {kind(value)}")
    unknown(value, NORM_KEYS, "norm_in.")
    out = {"kind": choice(value, "kind", ("layer", "rms"), "layer", "norm_in.kind"),
           "eps": number(value.get("eps", 1e-5), "norm_in.eps")}
    for key, default in (("gain", 1.0), ("bias", 0.0)):
        got = value.get(key)
        out[key] = (np.full((1, d_model), default) if got is None
                    else vectors(got, f"norm_in.{key}", 1, d_model))
    if not 0 < out["eps"] < 1:
        raise ScenarioError("norm_in.eps", f"expected a number between 0 and 1, got {out['eps']:g}")
    return out


def context(data: dict, layout: str, shapes) -> tuple[np.ndarray | None, list[str] | None]:
    """Cross-attention's context (M × d_context, rows orientation) and its token labels."""
    if "context" not in data:
        if "context_tokens" in data:
            raise ScenarioError("context_tokens", "expected a context to label (cross-attention needs `context`)")
        return None, None
    c = matrix(data["context"], "context")
    shapes.check("context", c.shape, ("context", "d_context"))
    c = c if layout == "rows" else c.T
    names = labels(data.get("context_tokens", [f"c{i + 1}" for i in range(c.shape[0])]), c.shape[0],
                   "context_tokens")
    return c, names


def residual(value) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ScenarioError("residual", f"expected a table with norm and eps, got {kind(value)}")
    unknown(value, ("norm", "eps"), "residual.")
    norm = choice(value, "norm", ("layer", "none"), "layer", "residual.norm")
    eps = value.get("eps", 1e-5)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (0 < eps < 1):
        raise ScenarioError("residual.eps", f"expected a number between 0 and 1, got {kind(eps)}")
    return {"norm": norm, "eps": float(eps)}


def decode(value, n: int, mask, cross: bool) -> int | None:
    """[decode] prompt = P: the tokens processed at once before the rest arrive one by one."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ScenarioError("decode", f"expected a table with prompt, got {kind(value)}")
    unknown(value, ("prompt",), "decode.")
    prompt = value.get("prompt")
    if isinstance(prompt, (bool, np.bool_)) or not isinstance(prompt, (int, np.integer)) or not 1 <= prompt <= n:
        raise ScenarioError("decode.prompt", f"expected a whole number from 1 to {n} (the tokens of x), got {kind(prompt)}")
    if cross:
        raise ScenarioError("decode", "expected self-attention (a decoder caches its own keys), not a context")
    if not (isinstance(mask, str) and mask == "causal"):
        raise ScenarioError("mask", "expected causal with [decode] (a token never sees the ones after it), got "
                            + (mask if isinstance(mask, str) else "a matrix"))
    return int(prompt)
