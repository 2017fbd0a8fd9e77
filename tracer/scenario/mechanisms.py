"""The mechanisms of today's checkpoints, as a scenario file writes them: QK-norm (`[weights] q_norm`,
`k_norm`, `norm_eps`, `norm_scope`), soft-capping (`softcap = C`), ALiBi (`alibi = true` or the
slopes), and a norm of the attention's output (`[out_norm]`). Each is read and checked here."""
from __future__ import annotations

import numbers

import numpy as np

from ..alibi import alibi_slopes
from ..checks import choice, kind, number, unknown
from ..errors import ScenarioError
from .parts import vectors

SCOPES = ("head", "all")


def qk_norm(weights: dict, heads: int, groups: int, d_k: int) -> dict:
    """q_norm (heads × d_k) and k_norm (groups × d_k): one gain vector for all heads or one per
    head (per group for k), with the eps and the scope of the root mean square."""
    given = [key for key in ("q_norm", "k_norm") if key in weights]
    if not given:
        for key in ("norm_eps", "norm_scope"):
            if key in weights:
                raise ScenarioError(f"weights.{key}", "expected only with q_norm and k_norm (QK-norm's gains)")
        return {}
    if len(given) == 1:
        other = "k_norm" if given[0] == "q_norm" else "q_norm"
        raise ScenarioError(f"weights.{other}", f"missing; expected with weights.{given[0]} (QK-norm normalises "
                            "the queries and the keys)")
    eps = number(weights.get("norm_eps", 1e-6), "weights.norm_eps")
    if not 0 <= eps < 1:
        raise ScenarioError("weights.norm_eps", f"expected a number from 0 to 1 (added to the mean square), got {eps:g}")
    return {"q_norm": vectors(weights["q_norm"], "weights.q_norm", heads, d_k, "d_k"),
            "k_norm": vectors(weights["k_norm"], "weights.k_norm", groups, d_k, "d_k"),
            "qk_norm_eps": eps, "qk_norm_scope": choice(weights, "norm_scope", SCOPES, "head", "weights.norm_scope")}


def softcap(value) -> float | None:
    """C of C·tanh(s / C): a number > 0."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ScenarioError("softcap", f"expected a number C > 0 (scores become C·tanh(s / C)), got {kind(value)}")
    cap = number(value, "softcap")
    if cap <= 0:
        raise ScenarioError("softcap", f"expected a number C > 0 (scores become C·tanh(s / C)), got {kind(value)}")
    return cap


def alibi(value, heads: int, cross: bool) -> np.ndarray | None:
    """`true`: the paper's slopes for the heads; a list: one slope per head; `false`: none."""
    if value is None or value is False:
        return None
    if cross:
        raise ScenarioError("alibi", "expected self-attention (ALiBi penalises the distance between a query and a "
                            "key of the same sequence), not a context")
    if value is True:
        return alibi_slopes(heads)
    if isinstance(value, np.ndarray) and value.ndim == 1:
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not value or isinstance(value[0], (list, tuple, np.ndarray)):
        raise ScenarioError("alibi", f"expected true (the paper's slopes) or a list of {_slopes(heads)} (one per "
                            f"head), got {kind(value)}")
    if len(value) != heads:
        raise ScenarioError("alibi", f"expected {_slopes(heads)} (one per head), got {len(value)}")
    return np.array([number(m, f"alibi[{h}]") for h, m in enumerate(value)], dtype=np.float64)


def _slopes(heads: int) -> str:
    return f"{heads} slope{'s' if heads != 1 else ''}"


def out_norm(value, d_out: int) -> dict | None:
    """[out_norm]: an RMS norm of each token's attention output (`gain`: one number per feature of
    the output, default 1; `eps`, default 1e-6), before the residual adds it to x."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ScenarioError("out_norm", f"expected a table with kind, gain and eps, got {kind(value)}")
    unknown(value, ("kind", "gain", "eps"), "out_norm.")
    eps = number(value.get("eps", 1e-6), "out_norm.eps")
    if not 0 <= eps < 1:
        raise ScenarioError("out_norm.eps", f"expected a number from 0 to 1 (added to the mean square), got {eps:g}")
    gain = value.get("gain")
    return {"kind": choice(value, "kind", ("rms",), "rms", "out_norm.kind"), "eps": eps,
            "gain": np.ones((1, d_out)) if gain is None else vectors(gain, "out_norm.gain", 1, d_out, "d_out")}


def sinks(value, heads: int) -> np.ndarray | None:
    """[weights] sinks: one logit per head, the score of a key no token owns (gpt-oss)."""
    if value is None:
        return None
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, list):
        raise ScenarioError("weights.sinks", f"expected a list of {_numbers(heads)} (one sink logit per head), "
                            f"got {kind(value)}")
    if len(value) != heads:
        raise ScenarioError("weights.sinks", f"expected {_numbers(heads)} (one sink logit per head), got {len(value)}")
    return np.array([number(s, f"weights.sinks[{h}]") for h, s in enumerate(value)], dtype=np.float64)


def _numbers(count: int) -> str:
    return f"{count} number{'s' if count != 1 else ''}"


def refuse_with_decode(scenario) -> None:
    """[decode] runs the textbook layer token by token: a mechanism it does not run is refused."""
    if scenario.decode is None:
        return
    found = [name for name, there in (("weights.q_norm", scenario.q_norm is not None),
                                      ("softcap", scenario.softcap is not None),
                                      ("alibi", scenario.alibi is not None),
                                      ("weights.sinks", scenario.sinks is not None),
                                      ("out_norm", scenario.out_norm is not None),
                                      ("score_bias", scenario.score_bias is not None)) if there]
    if found:
        raise ScenarioError(found[0], "expected no [decode] section with it (decoding token by token runs the "
                            "layer without QK-norm, soft-capping, ALiBi, sinks, an additive mask or an output norm); trace the whole "
                            "layer at once instead")
