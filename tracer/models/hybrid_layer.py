"""One layer of a hybrid checkpoint (Qwen3-Next, Qwen3.5, OLMo-Hybrid, Kimi Linear, MiniMax; CONTRACT §16) as
the keyword arguments of `tracer.from_arrays`: x is the residual stream entering it, through the
earlier layers of both kinds (hybrid_block.stream); a linear layer becomes `[linear]` with the
checkpoint's decay and β for these tokens, its convolution and its gated norm (the engine's
mechanisms/linear); a softmax layer the house's layer with QK-norm, partial rotary and the output
gate (mechanisms/output_gate); a MiniMax lightning layer `[linear]` under the decay rule with SiLU
on q, k, v and one norm over every head's output. Value head h of a linear layer reads key head
h·key_heads // heads, as transformers repeats them, so its q and k are given once per value head."""
from __future__ import annotations

import numpy as np

from ..errors import ScenarioError
from ..mechanisms.linear.gates import rms_norm, sigmoid
from . import hybrid_block, hybrid_tensors
from .hybrid_attention import LATENT_EPS
from .hybrid_config import HYBRIDS, NESTED, Hybrid, hybrid_of
from .hybrid_linear import LIGHTNING_EPS, decay
from .tokens import encode
from .weights import Tensors


def is_hybrid(data: dict) -> bool:
    kind = data.get("model_type")   # any JSON value: a list is refused later, naming the key
    return isinstance(kind, str) and (kind in HYBRIDS or kind in NESTED)


def described(cfg: Hybrid, path: str | None, text: str, layer: int, heads=None) -> dict:
    """origin()'s dict for a hybrid: its layers' kinds, and what a linear layer keeps against its softmax ones."""
    names = kinds(cfg)
    return {"path": path, "text": text, "layer": layer, "layers": len(names), "heads": None if heads is None else
            list(heads), "kind": names[layer], "kinds": names, "keeps": cfg.footprint()._asdict()}


def kinds(cfg: Hybrid) -> list[str]:
    """Each layer's kind in words: `linear (delta)`, `global, rope 25 %`, `global, NoPE`, `latent, NoPE`."""
    share = "" if cfg.rope is None or not cfg.rope.get("dims") else f" {round(100 * cfg.rope['dims'] / cfg.head_dim)} %"
    softmax = "latent, NoPE" if cfg.family.attention == "latent" else \
        "global, NoPE" if cfg.rope is None else f"global, rope{share}"
    return [f"linear ({cfg.family.rule})" if lin else softmax for lin in cfg.linear]


def layer_arrays(folder, data: dict, text: str, layer: int, label: str, what: str) -> dict:
    """from_arrays keywords for layer `layer` of the hybrid checkpoint in `folder` on `text`."""
    cfg = hybrid_of(data)
    check(cfg, layer)
    ids, pieces = encode(folder, text, 1 << 20)
    return traced(Tensors(folder), cfg, ids, pieces, layer, label, what)


def check(cfg: Hybrid, layer) -> None:
    if not isinstance(layer, int) or isinstance(layer, bool) or not 0 <= layer < cfg.layers:
        raise ScenarioError("model.layer", f"expected a layer from 0 to {cfg.layers - 1} (the model has {cfg.layers}), "
                            f"got {layer!r}")


def traced(t, cfg: Hybrid, ids: list[int], pieces: list[str], layer: int, label: str, what: str) -> dict:
    """layer_arrays() from a source of tensors (a folder's, or a model's state dict in memory)."""
    x = hybrid_block.stream(t, cfg, ids, layer)
    norms = hybrid_tensors.norms(t, cfg, layer)
    arrays = _linear(t, cfg, layer, x, norms) if cfg.linear[layer] else \
        _latent(t, cfg, layer, norms, len(ids)) if cfg.family.attention == "latent" else _softmax(t, cfg, layer, norms)
    kind = kinds(cfg)[layer]
    # MiniMax's residual adds α·RMSNorm(x) + β·mixer, not x + mixer: the trace stops at the mixer's output
    residual = None if cfg.factors else dict(norm="none")
    return dict(x=x, tokens=pieces, residual=residual, mask="causal", layout="rows", **arrays,
                name=f"{label}_layer{layer}",
                title=f"{label}, layer {layer} ({kind}): {len(ids)} tokens, d_model {cfg.d_model}",
                description=f"Layer {layer} of {cfg.layers} of {what}. x is the residual stream entering the layer, "
                            f"computed by running the earlier layers of both kinds; this layer is {kind}."
                            + (" MiniMax adds α·RMSNorm(x) + β·out to the stream, not x + out: the trace ends "
                               "at out." if cfg.factors else ""))


def _norm_in(gain, cfg: Hybrid) -> dict | None:
    return None if gain is None else dict(kind="rms", gain=gain, eps=cfg.eps)


def _linear(t, cfg: Hybrid, i: int, x: np.ndarray, norms: dict) -> dict:
    """A linear layer: per value head h its key head g's q and k columns, its own v columns; the
    conv's kernels likewise; α and β as the checkpoint computes them on these tokens."""
    w = hybrid_tensors.linear_mixer(t, cfg, i)
    if cfg.family.projections == "lightning":
        return _lightning(w, cfg, x, norms)
    H, dk, dv, kd = cfg.v_heads, cfg.d_k, cfg.d_v, cfg.k_heads * cfg.d_k
    g = [h * cfg.k_heads // H for h in range(H)]
    q_cols = [slice(g[h] * dk, (g[h] + 1) * dk) for h in range(H)]
    k_cols = [slice(kd + g[h] * dk, kd + (g[h] + 1) * dk) for h in range(H)]
    v_cols = [slice(2 * kd + h * dv, 2 * kd + (h + 1) * dv) for h in range(H)]
    h_in = x if norms["before"] is None else rms_norm(x, norms["before"], cfg.eps)
    alpha = decay(h_in, w, cfg)
    z = w["z"] if w["z_down"] is None else w["z_down"] @ w["z"]
    stack = lambda m, cols: np.stack([m[..., c] for c in cols])   # noqa: E731
    conv = w["conv"].T   # K × channels, so that columns pick channels
    return dict(
        q=list(stack(w["qkv"], q_cols)), k=list(stack(w["qkv"], k_cols)), v=list(stack(w["qkv"], v_cols)), o=w["out"],
        norm_in=_norm_in(norms["before"], cfg),
        linear=dict(rule=cfg.family.rule, decay=alpha if cfg.family.rule == "kda" else alpha[..., 0],
                    beta=(cfg.beta_max * sigmoid(h_in @ w["b"])).T, l2=True,
                    conv=dict(q=stack(conv, q_cols).transpose(0, 2, 1), k=stack(conv, k_cols).transpose(0, 2, 1),
                              v=stack(conv, v_cols).transpose(0, 2, 1)),
                    norm=dict(w_z=stack(z, [slice(h * dv, (h + 1) * dv) for h in range(H)]), gain=w["norm"], act=cfg.family.gate,
                              eps=cfg.eps if cfg.family.gate_eps is None else cfg.family.gate_eps)))


def _lightning(w: dict, cfg: Hybrid, x: np.ndarray, norms: dict) -> dict:
    """MiniMax's lightning layer: q, k, v per head (SiLU'd by `act`), α_h = exp(−slope_h) on every
    token, no β, no L2 norm, q not scaled; z one RMS norm over all heads' o, each head its share of
    the gain and of σ(x·W_Z)."""
    H, d = cfg.v_heads, cfg.d_k
    per = lambda m, at: [m[:, at + h * d: at + (h + 1) * d] for h in range(H)]   # noqa: E731
    return dict(q=per(w["qkv"], 0), k=per(w["qkv"], H * d), v=per(w["qkv"], 2 * H * d), o=w["out"],
                norm_in=_norm_in(norms["before"], cfg), defaults=dict(scale="none"),
                linear=dict(rule="decay", decay=decay(x, w, cfg)[..., 0],
                            l2=False, act="silu",
                            norm=dict(w_z=np.stack(per(w["z"], 0)), gain=w["norm"].reshape(H, d), scope="all",
                                      act="sigmoid", eps=LIGHTNING_EPS)))


def _latent(t, cfg: Hybrid, i: int, norms: dict, n: int) -> dict:
    """Kimi Linear's latent attention, which has no positions: the house's [mla] with every token at
    position 0, so that the rotary part turns by no angle (k_pe and q_pe as the projections give them)."""
    w, m, H = hybrid_tensors.attention(t, cfg, i), cfg.mla, cfg.heads

    def per_head(a: np.ndarray, parts: tuple) -> list:
        a = a.reshape(a.shape[0], H, sum(parts))
        return [np.split(a[:, h], [parts[0]], axis=1) for h in range(H)]
    q = per_head(w["q"] if m["q_rank"] is None else w["q_b"], (m["nope"], m["rope"]))
    up = per_head(w["kv_b"], (m["nope"], m["v"]))
    mla = dict(down=w["kv_a"][:, :m["kv_rank"]], rope_k=w["kv_a"][:, m["kv_rank"]:], kv_norm=w["kv_norm"],
               up_k=[u[0] for u in up], up_v=[u[1] for u in up], q=[p[0] for p in q], rope_q=[p[1] for p in q],
               norm_eps=LATENT_EPS)
    if m["q_rank"] is not None:
        mla.update(q_down=w["q_a"], q_norm=w["q_norm"])
    return dict(mla=mla, o=w["o"], norm_in=_norm_in(norms["before"], cfg), rope=dict(positions=[0] * n))


def _softmax(t, cfg: Hybrid, i: int, norms: dict) -> dict:
    """A softmax layer: Qwen's (QK-norm per head, partial rotary, output gate) or OLMo-Hybrid's (QK-norm
    over the width, norms after the layer)."""
    w = hybrid_tensors.attention(t, cfg, i)
    H, G, d = cfg.heads, cfg.kv_heads, cfg.head_dim
    split = lambda m, count: None if m is None else list(m.reshape(*m.shape[:-1], count, d).swapaxes(0, -2)  # noqa: E731
                                                        if m.ndim == 2 else m.reshape(count, d))
    out = dict(q=split(w["q"], H), k=split(w["k"], G), v=split(w["v"], G), o=w["o"], bq=split(w["bq"], H),
               bk=split(w["bk"], G), bv=split(w["bv"], G), bo=w["bo"], norm_in=_norm_in(norms["before"], cfg),
               qk_norm_eps=None if cfg.family.attention == "plain" else cfg.eps, rope=cfg.rope)
    if cfg.family.attention == "gated":
        out.update(q_norm=[w["q_norm"]] * H, k_norm=[w["k_norm"]] * G, gate=split(w["gate"], H),
                   b_gate=split(w.get("bgate"), H))
    elif cfg.family.attention == "olmo":   # over the whole width, and its norm after the layer (MiniMax: neither)
        out.update(q_norm=list(w["q_norm"].reshape(H, d)), k_norm=list(w["k_norm"].reshape(G, d)),
                   qk_norm_scope="all", out_norm=dict(gain=norms["after"], eps=cfg.eps))
    return {key: value for key, value in out.items() if value is not None}
