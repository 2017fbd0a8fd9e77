"""The `[linear]` section as the scenario reader meets it: section.py's keys, read once the layer's
sizes are known, and the refusals of what a linear layer cannot have beside it (a softmax's parts,
positions, a context, a mask other than causal, arithmetic keys of a softmax). Each one line naming
the field and what was expected."""
from __future__ import annotations

import numpy as np

from ...errors import ScenarioError
from .section import read_linear

# what a linear layer refuses beside it, by Scenario field: (the field a message names, why); the others,
# a norm of the values or of the output, stay
_BESIDE = {
    "alibi": ("alibi", "expected no ALiBi with [linear] (its penalty is added to scores before a softmax; a linear "
                       "layer has neither: its decay is the multiplicative twin, see linear_decay)"),
    "sinks": ("weights.sinks", "expected no sinks with [linear] (a sink is one more logit in a softmax; a linear "
                               "layer has none)"),
    "softcap": ("softcap", "expected no softcap with [linear] (it caps the scores of softmax attention; a linear "
                           "layer forms none)"),
    "score_bias": ("score_bias", "expected no score_bias with [linear] (it is added to the scores of softmax "
                                 "attention; a linear layer forms none)"),
    "q_norm": ("weights.q_norm", "expected no QK-norm with [linear] (its RMS norm of q and k is softmax "
                                 "attention's; use l2 = true to norm q and k by their length)"),
    "mla": ("mla", "expected no [mla] with [linear] (latent attention rebuilds keys for a softmax; a linear layer "
                   "keeps a state instead)"),
    "rope": ("rope", "expected no [rope] with [linear] (the hybrids' linear layers carry no positions: the decay "
                     "and the convolution order the tokens)"),
    "w_gate": ("weights.gate", "expected no gate with [linear] (σ(x·W_G) is the softmax layers' output gate; a "
                               "linear layer's gated norm comes from its checkpoint)"),
}
SOFTMAX_KEYS = ("softmax_base", "normalize", "stable", "algorithm", "block")
MODEL_KEYS = ("act", "conv", "norm")   # a checkpoint's parts around the recurrence (stages.py)


def read(scenario, data: dict) -> dict:
    """{"linear": {rule, alpha, beta, l2}} or {"linear": None}; refused beside what it cannot have."""
    section = data.get("linear")
    if section is None:
        return {"linear": None}
    _refuse_beside(scenario, data)
    model = {key: section[key] for key in MODEL_KEYS if isinstance(section, dict) and key in section}
    got = read_linear({k: v for k, v in section.items() if k not in model} if model else section,
                      scenario.heads, scenario.n, scenario.d_k)
    if model and scenario.decode is not None:   # decode.py carries the bare recurrence token by token
        raise ScenarioError("decode", f"expected no [decode] beside [linear] {', '.join(model)} (a checkpoint's parts "
                            "around the recurrence are traced over the whole text only)")
    act = model.get("act")
    if act not in (None, "silu"):
        raise ScenarioError("linear.act", "expected \"silu\" (SiLU on q, k and v as projected: MiniMax's lightning "
                            "layers) or no act")
    return {"linear": {**got._asdict(), "act": act, "conv": _conv(model.get("conv"), scenario),
                       "norm": _norm(model.get("norm"), scenario)}}


def _array(value, field: str, shape: tuple) -> np.ndarray:
    a = np.asarray(value, dtype=np.float64) if not isinstance(value, (str, bool, dict)) else None
    if a is None or a.shape != shape or not np.isfinite(a).all():
        got = "a value of another kind" if a is None else f"shape {a.shape}"
        raise ScenarioError(field, f"expected finite numbers of shape {shape}, got {got}")
    return np.ascontiguousarray(a)   # as every trace's kernels read it (a checkpoint's may be transposed)


def _conv(conv, sc) -> dict | None:
    """A checkpoint's short convolution: {q: heads × d_k × K, k: groups × d_k × K, v: groups × d_v × K}."""
    if conv is None:
        return None
    if not isinstance(conv, dict) or set(conv) != {"q", "k", "v"}:
        raise ScenarioError("linear.conv", "expected a table of q, k and v kernels (a checkpoint's short convolution)")
    width = np.shape(conv["q"])[-1] if np.ndim(conv["q"]) == 3 else 0
    sizes = {"q": (sc.heads, sc.d_k), "k": (sc.groups, sc.d_k), "v": (sc.groups, sc.d_v)}
    return {key: _array(conv[key], f"linear.conv.{key}", (*sizes[key], width)) for key in "qkv"}


def _norm(norm, sc) -> dict | None:
    """A checkpoint's gated norm of each head's output: {w_z: heads × d_model × d_v, gain, eps, act,
    scope}: scope "head" (the RMS of each head's output, gain d_v) or "all" (MiniMax: the RMS of every
    head's outputs at the token together, gain heads × d_v, each head its share of the one gain)."""
    if norm is None:
        return None
    keys = {"w_z", "gain", "eps", "act"}
    if not isinstance(norm, dict) or not keys <= set(norm) <= keys | {"scope"} \
            or norm["act"] not in ("silu", "sigmoid") or norm.get("scope", "head") not in ("head", "all"):
        raise ScenarioError("linear.norm", "expected a table of w_z, gain, eps, act (silu or sigmoid) and an optional "
                            "scope (head or all): a checkpoint's gated norm")
    scope = norm.get("scope", "head")
    gain = (sc.heads, sc.d_v) if scope == "all" else (sc.d_v,)
    return dict(w_z=_array(norm["w_z"], "linear.norm.w_z", (sc.heads, sc.d_model, sc.d_v)),
                gain=_array(norm["gain"], "linear.norm.gain", gain), eps=float(norm["eps"]), act=norm["act"],
                scope=scope)


def _refuse_beside(scenario, data: dict) -> None:
    for name, (field, why) in _BESIDE.items():
        if getattr(scenario, name) is not None:
            raise ScenarioError(field, why)
    if scenario.context is not None:
        raise ScenarioError("context", "expected self-attention with [linear] (the state is written by the layer's "
                            "own tokens)")
    if not (isinstance(scenario.mask, str) and scenario.mask == "causal"):
        got = scenario.mask if isinstance(scenario.mask, str) else "a matrix"
        raise ScenarioError("mask", f"expected \"causal\" or no mask with [linear] (a linear layer reads only earlier "
                            f"tokens, by construction), got {got}")
    for key in SOFTMAX_KEYS:
        if key in (data.get("defaults") or {}):
            raise ScenarioError(f"defaults.{key}", "has no meaning in a linear layer ([linear]): no softmax is "
                                "taken; expected it unset")


def refuse_arithmetic(scenario, normalize: str, field: str = "normalize") -> None:
    """relu weights (normalize = relu) are a softmax's alternative: a linear layer takes neither."""
    if scenario.linear is not None and normalize != "softmax":
        raise ScenarioError(field, "has no meaning in a linear layer ([linear]): no softmax is taken; expected it "
                            "unset")


def refuse_run(run) -> None:
    """What a run's own keys (--set, run's keywords) may change that a linear layer cannot take: the mask,
    and a softmax's keys set away from the preset's (the by-hand preset's base 3 is simply unused)."""
    from ...arithmetic import resolve
    preset = resolve(run.arithmetic.preset, {})
    for key in ("softmax_base", "stable"):
        if getattr(run.arithmetic, key) != getattr(preset, key):
            raise ScenarioError(key, "has no meaning in a linear layer ([linear]): no softmax is taken; expected it "
                                "unset", run.scenario.source)
    mask = run.mask
    if not (isinstance(mask, str) and mask == "causal"):
        got = mask if isinstance(mask, str) else "a matrix"
        raise ScenarioError("mask", f"expected \"causal\" with [linear] (a linear layer reads only earlier tokens, "
                            f"by construction), got {got}", run.scenario.source)
