"""A hybrid checkpoint's blocks, one after the other, in float64 NumPy: the residual stream entering
each layer as the model computes it through the earlier layers of both kinds (linear and softmax),
their norms (pre-norms, or OLMo-Hybrid's norms after its softmax layers) and MLPs (gated, or a
mixture of experts with shared experts: Qwen3-Next's softmax router with a sigmoid gate on the
shared expert, Kimi's sigmoid router over groups with a correction bias; MiniMax's without one),
and MiniMax's residual, which adds to the NORMED stream: α·RMSNorm(x) + β·mixer."""
from __future__ import annotations

import numpy as np

from ..errors import ScenarioError
from ..mechanisms.linear.gates import rms_norm, sigmoid, silu
from . import hybrid_tensors as tensors
from .deepseek_experts import route
from .hybrid_attention import attention_layer
from .hybrid_config import Hybrid
from .hybrid_linear import linear_layer
from .experts import mixture


def embed(t, ids: list[int]) -> np.ndarray:
    name = tensors.prefix(t) + "embed_tokens.weight"
    if max(ids) >= t.shape(name)[0]:
        raise ScenarioError("tokenizer.json", f"gives token id {max(ids)}; expected ids below the model's "
                            f"vocabulary of {t.shape(name)[0]}", str(t.folder))
    return t.rows(name, ids)


def gated_mlp(h: np.ndarray, w: dict) -> np.ndarray:
    """down(SiLU(h·gate) ⊙ h·up)."""
    return (silu(h @ w["gate"]) * (h @ w["up"])) @ w["down"]


def mlp(h: np.ndarray, t, cfg: Hybrid, i: int) -> np.ndarray:
    """Block i's MLP on the normed stream h: gated, or routed experts (each read when a token
    chose it) plus the shared expert(s)."""
    at = tensors.block(t, i)
    if not cfg.sparse[i]:
        return gated_mlp(h, tensors.dense(t, at))
    r = tensors.router(t, at)
    chosen, shares = route(h @ r["gate"].T, cfg.moe, r["bias"])
    out = mixture(h, chosen, shares, lambda e, rows: gated_mlp(rows, tensors.expert(t, at, e)))
    if r["shared"] is not None:
        shared = gated_mlp(h, r["shared"])
        out = out + (shared if r["shared_gate"] is None else sigmoid(h @ r["shared_gate"]) * shared)
    return out


def mixer(h: np.ndarray, t, cfg: Hybrid, i: int, **keep) -> dict:
    """Layer i's token mixer on the normed stream: its every step (linear or softmax) and `out`."""
    if cfg.linear[i]:
        return linear_layer(h, tensors.linear_mixer(t, cfg, i), cfg, **keep)
    return attention_layer(h, tensors.attention(t, cfg, i), cfg)


def _normed(x: np.ndarray, gain: np.ndarray | None, cfg: Hybrid) -> np.ndarray:
    return x if gain is None else rms_norm(x, gain, cfg.eps)


def run_block(x: np.ndarray, t, cfg: Hybrid, i: int, **keep) -> tuple[np.ndarray, dict]:
    """(the stream after block i, the mixer's steps): x + mixer, then + MLP, each between the
    norms the family puts around it."""
    nrm = tensors.norms(t, cfg, i)
    if cfg.factors:
        return _scaled_block(x, t, cfg, i, nrm, **keep)
    parts = mixer(_normed(x, nrm["before"], cfg), t, cfg, i, **keep)
    x = x + _normed(parts["out"], nrm["after"], cfg)
    return x + _normed(mlp(_normed(x, nrm["mlp_before"], cfg), t, cfg, i), nrm["mlp_after"], cfg), parts


def _scaled_block(x: np.ndarray, t, cfg: Hybrid, i: int, nrm: dict, **keep) -> tuple[np.ndarray, dict]:
    """MiniMax's block: h = RMSNorm(x), x' = α·h + β·mixer(h); h' = RMSNorm(x'), out = α'·h' + β'·MLP(h')
    (the factors of the layer's kind, then the MLP's)."""
    f, kind = cfg.factors, "linear_attn" if cfg.linear[i] else "full_attn"
    h = rms_norm(x, nrm["before"], cfg.eps)
    parts = mixer(h, t, cfg, i, **keep)
    x = f[kind + "_alpha_factor"] * h + f[kind + "_beta_factor"] * parts["out"]
    h = rms_norm(x, nrm["mlp_before"], cfg.eps)
    return f["mlp_alpha_factor"] * h + f["mlp_beta_factor"] * mlp(h, t, cfg, i), parts


def stream(t, cfg: Hybrid, ids: list[int], layer: int) -> np.ndarray:
    """The residual stream entering `layer` (n × d_model); the linear layers before it skip their
    states and implicit weights (nobody looks at them)."""
    if not 0 <= layer < cfg.layers:
        raise ScenarioError("layer", f"expected a layer from 0 to {cfg.layers - 1}, got {layer}")
    x = embed(t, ids)
    for i in range(layer):
        x, _ = run_block(x, t, cfg, i, **({"states": False, "implicit": False} if cfg.linear[i] else {}))
    return x
