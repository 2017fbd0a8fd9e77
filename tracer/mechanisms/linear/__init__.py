"""Linear attention: layers that keep a state of d_k × d_v numbers per head instead of a cache that
grows with every token, and never form the n × n weights.

Each token t updates the state S (d_k × d_v) and then reads it with its query:

    decay   S_t = diag(α_t)·S_{t−1} + k_t·v_tᵀ                       (α = 1: plain linear attention)
    delta   S_t = (I − β_t·k_t·k_tᵀ)·α_t·S_{t−1} + β_t·k_t·v_tᵀ      (Gated DeltaNet)
    kda     the delta rule with a decay per key channel, diag(α_t)   (Kimi Delta Attention)
    o_t = S_tᵀ·q_t

With S kept as d_k × d_v (transformers and FLA keep it so), the erasing factor multiplies from the
left; papers that keep Sᵀ (d_v × d_k) write it on the right, S_{t−1}·(I − β·k·kᵀ). The delta rule
first predicts what the decayed state already holds for k_t (Sᵀ·k_t), then writes only β times the
error v_t − Sᵀ·k_t.

The layer is linear in the values, so it implies weights it never builds: o = A·v with A[t, s] the
weight of value s in output t (`formula.implicit`); rows need not sum to 1 and cells can be negative.

formula.py is the arithmetic in plain NumPy (float64, float32, or Python Fractions: rational inputs
give rational states, outputs and weights); gates.py the pieces around it in a real model (the short
convolution, the L2 norm, the gated RMS norm, the output gate, the decay and β of a checkpoint);
footprint.py what a linear layer keeps against a softmax layer's cache. The compiled kernel for
long inputs is tracer/kernels/linear.py. The engine's side: reader.py (the `[linear]` section and what
it refuses beside it; section.py its keys), steps.py (the steps decay, beta, state, o, implicit, z),
compute.py (one head's numbers in a trace).
"""
from __future__ import annotations

from ..declaration import Mechanism
from . import stages, steps  # noqa: F401  (register their kinds)
from .reader import read, refuse_arithmetic


def _arrays(sc) -> dict:
    lin = sc.linear
    return {"linear.decay": lin["alpha"], **({} if lin["beta"] is None else {"linear.beta": lin["beta"]})}


def _dims(sc) -> tuple:
    """(rule, l2, the convolution's width or 0, the gated norm's scope or None, SiLU on q, k, v):
    what a plan depends on."""
    lin = sc.linear
    conv, norm = lin.get("conv"), lin.get("norm")
    return (lin["rule"], lin["l2"], 0 if conv is None else conv["q"].shape[-1], None if norm is None else norm["scope"],
            lin.get("act") is not None)


def _describe(sc) -> dict:
    lin = sc.linear
    return dict(rule=lin["rule"], l2=lin["l2"], keeps=keeps(sc)._asdict())


def keeps(sc):
    """What the layer keeps against a softmax layer's cache: a checkpoint's own softmax layers' (its
    `model` origin says), else one of the same shapes (its key/value heads, d_k)."""
    from .footprint import Footprint, footprint, kv_per_token
    if sc.model and sc.model.get("keeps"):
        return Footprint(**sc.model["keeps"])
    return footprint(sc.heads, sc.d_k, sc.d_v, kv_per_token(sc.groups, sc.d_k))


def _given_words(sc) -> str:
    lin, words = sc.linear, []
    for name, key in (("decay α", "alpha"), ("β", "beta")):
        if lin[key] is not None:
            words.append(f"the {name} of each token as [linear] gives it")
    return f"the {lin['rule']} rule; " + " and ".join(words)


def _arithmetic_words(trace) -> str:
    """The arithmetic a sheet states for a linear layer: how q̂ is made, and no softmax to take."""
    from .compute import scale_words
    return f"{scale_words(trace.arithmetic, trace.scenario.d_k)}; no scores and no powers, {trace.arithmetic.dtype}"


DECLARATION = Mechanism(
    "linear", "linear attention", field="linear", label="[linear]", keys=("linear",), read=read,
    arguments={"linear": "linear"}, dims=_dims, arrays=_arrays,
    describe=_describe, given_words=_given_words,
    unfillable=lambda sc: "its q and k are divided by √(Σx²), not small fractions" if sc.linear["l2"] else None,
    fused=False, online=False, arithmetic=refuse_arithmetic,
    texts={"arithmetic.words": lambda trace: _arithmetic_words(trace)})   # a sheet's line: no scores, no powers
