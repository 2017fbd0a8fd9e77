"""One block's tensors, read as its family declares them and put into the same shapes for every
family (rows orientation: Q = X·W_Q), so that one forward serves them all: fused q, k, v and
gate/up tensors split, Conv1D and nn.Linear orientations made one, Gemma's gains made 1 + w."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ScenarioError
from . import fp8, mxfp4
from .config import Config
from .weights import DTYPES, Tensors


@dataclass
class Block:
    """One transformer block, rows orientation: q is d_model × (heads·head_dim), head h's columns
    h·head_dim … (h+1)·head_dim; k and v d_model × (groups·head_dim); o (heads·head_dim) × d_model;
    biases are vectors of those widths, or None. A norm is {"kind": "layer" | "rms", "gain",
    "bias", "eps"} or None where the family has none."""
    norm_in: dict | None
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    o: np.ndarray
    bq: np.ndarray | None
    bk: np.ndarray | None
    bv: np.ndarray | None
    bo: np.ndarray | None
    q_norm: np.ndarray | None = None     # QK-norm gains: head_dim, or heads·head_dim for OLMo 2's
    k_norm: np.ndarray | None = None
    out_norm: dict | None = None         # a norm of the attention's output before the residual
    norm_mlp: dict | None = None
    mlp: dict | None = None              # up, b_up, down, b_down, and gate, b_gate when gated
    mlp_out: dict | None = None
    sinks: np.ndarray | None = None      # one sink logit per query head (gpt-oss)
    moe: dict | None = None              # router, b_router, expert(e) → that expert's matrices


def prefix(tensors: Tensors, cfg: Config) -> str:
    """What the checkpoint puts before the names (`transformer.`, `model.`, or nothing)."""
    tail = cfg.family.embed + ".weight"
    for name in tensors.names:
        if name.endswith(tail) and (name == tail or name.endswith("." + tail)):
            return name[: -len(tail)]
    raise ScenarioError(tail, f"is missing; expected the token embeddings of a {cfg.model_type} checkpoint",
                        str(tensors.folder))


def _linear(cfg: Config, name: str, out: int, inp: int) -> dict[str, tuple]:
    """A projection's weight and bias as saved: nn.Linear (out, in), GPT-2's Conv1D (in, out)."""
    return {name + ".weight": (inp, out) if cfg.family.conv1d else (out, inp), name + ".bias": (out,)}


def shapes(cfg: Config, pre: str, i: int, mlp: bool) -> dict[str, tuple[int, ...]]:
    """Every tensor block i reads, with the shape config.json implies, so that a broken
    checkpoint is refused by name before any arithmetic (biases are checked where saved)."""
    fam, d, hd = cfg.family, cfg.d_model, cfg.head_dim
    p, a = pre + fam.block(i), pre + fam.block(i) + fam.attention + "."
    q, kv = cfg.heads * hd, cfg.groups * hd
    want = {}
    for name in (fam.attn_in, fam.attn_out) + ((fam.mlp_in, fam.mlp_out) if mlp else ()):
        if name is not None:
            want.update({p + name + ".weight": (d,)} if fam.norm == "rms" else {p + name + ".weight": (d,),
                                                                                p + name + ".bias": (d,)})
    if fam.qkv:
        want.update(_linear(cfg, a + fam.qkv, q + 2 * kv, d))
    else:
        for name, width in ((fam.q, q), (fam.k, kv), (fam.v, kv)):
            want.update(_linear(cfg, a + name, width, d))
    want.update(_linear(cfg, a + fam.o, d, q))
    if fam.qk_norm:
        each = fam.qk_norm == "head"
        want.update({a + "q_norm.weight": (hd if each else q,), a + "k_norm.weight": (hd if each else kv,)})
    if fam.sinks:
        want[a + "sinks"] = (cfg.heads,)
    if mlp and cfg.moe and cfg.moe["sparse"][i]:
        want.update(moe_shapes(cfg, p + "mlp."))
    elif mlp:
        m = p + "mlp."
        if fam.gate_up:
            want.update(_linear(cfg, m + fam.gate_up, 2 * cfg.inner, d))
        for name in fam.mlp[:-1]:
            want.update(_linear(cfg, m + name, cfg.inner, d))
        want.update(_linear(cfg, m + fam.mlp[-1], d, cfg.inner))
    return want


def moe_shapes(cfg: Config, m: str) -> dict[str, tuple[int, ...]]:
    """A mixture's router and experts: Qwen3-MoE's one nn.Linear per expert, gpt-oss's stacked
    experts × in × out tensors (gate and up interleaved) with biases."""
    d, n, e = cfg.d_model, cfg.moe["inner"], cfg.moe["experts"]
    if cfg.family.experts == "gpt_oss":
        x = m + "experts."
        return {m + "router.weight": (e, d), m + "router.bias": (e,), x + "gate_up_proj": (e, d, 2 * n),
                x + "gate_up_proj_bias": (e, 2 * n), x + "down_proj": (e, n, d), x + "down_proj_bias": (e, d)}
    want = {m + "gate.weight": (e, d)}
    for j in range(e):
        want.update({f"{m}experts.{j}.gate_proj.weight": (n, d), f"{m}experts.{j}.up_proj.weight": (n, d),
                     f"{m}experts.{j}.down_proj.weight": (d, n)})
    return want


def check_shapes(tensors: Tensors, cfg: Config, want: dict) -> None:
    """Each tensor's shape as config.json implies; a bias of a family that saves them only
    sometimes (Llama's attention_bias, Falcon's bias) may be absent."""
    fam = cfg.family
    norms = {fam.attn_in, fam.attn_out, fam.mlp_in, fam.mlp_out, fam.embed_norm}
    for name, shape in want.items():
        module = name[: -len(".bias")].rsplit(".", 1)[-1] if name.endswith(".bias") else None
        if fam.biases == "saved" and module is not None and module not in norms and name not in tensors:
            continue
        if name not in tensors and name + "_blocks" in tensors:   # gpt-oss's experts, as published
            mxfp4.check(tensors, name, shape)
            continue
        got, dtype = tensors.shape(name), tensors.dtype(name)
        if dtype == fp8.DTYPE and fp8.scale_name(name) in tensors:   # fine-grained FP8 blocks
            fp8.check(tensors, name, shape)
        elif dtype not in DTYPES:
            raise ScenarioError(name, f"has dtype {dtype}; expected float64, float32, float16 or bfloat16 weights",
                                tensors.where(name))
        if got != shape:
            raise ScenarioError(name, f"has shape {_shape(got)}; expected {_shape(shape)}, as config.json's sizes "
                                "give", tensors.where(name))


def check_all(tensors: Tensors, cfg: Config, layer: int) -> None:
    """Every tensor the layer needs (blocks 0 … layer) against config.json, before any
    arithmetic: a broken block is named at once, not after the blocks before it have run."""
    pre = prefix(tensors, cfg)
    for i in range(layer + 1):
        check_shapes(tensors, cfg, shapes(cfg, pre, i, i < layer))


def _shape(shape: tuple) -> str:
    return "(" + ", ".join(map(str, shape)) + ")"


def embed(tensors: Tensors, cfg: Config, ids: list[int]) -> np.ndarray:
    """The token embeddings (× √d_model for Gemma), plus learned positions (GPT-2); BLOOM's
    stream then passes embed_norm's norm."""
    fam, pre = cfg.family, prefix(tensors, cfg)
    name = pre + fam.embed + ".weight"
    table = tensors.shape(name)
    if len(table) != 2 or table[1] != cfg.d_model or table[0] < 1:
        raise ScenarioError(name, f"has shape {_shape(table)}; expected (vocabulary, {cfg.d_model}), as "
                            "config.json's sizes give", tensors.where(name))
    if fam.positions_table:
        places = tensors.shape(pre + fam.positions_table + ".weight")
        if len(places) != 2 or places[1] != cfg.d_model or places[0] < len(ids):
            raise ScenarioError(pre + fam.positions_table + ".weight", f"has shape {_shape(places)}; expected "
                                f"({len(ids)} or more positions, {cfg.d_model}) for the text's {len(ids)} tokens",
                                tensors.where(pre + fam.positions_table + ".weight"))
    if max(ids) >= table[0]:
        raise ScenarioError("tokenizer.json", f"gives token id {max(ids)}; expected ids below the model's "
                            f"vocabulary of {table[0]}", str(tensors.folder))
    x = tensors.rows(name, ids)
    if cfg.embed_scale != 1.0:
        x *= cfg.embed_scale
    if fam.positions_table:
        x += tensors.rows(pre + fam.positions_table + ".weight", range(len(ids)))
    return x


def embed_norm(tensors: Tensors, cfg: Config) -> dict | None:
    """The norm right after the embeddings (BLOOM's), or None."""
    fam, pre = cfg.family, prefix(tensors, cfg)
    if not fam.embed_norm:
        return None
    check_shapes(tensors, cfg, {pre + fam.embed_norm + ".weight": (cfg.d_model,),
                                pre + fam.embed_norm + ".bias": (cfg.d_model,)})
    return _norm(tensors, cfg, pre + fam.embed_norm)


def block(tensors: Tensors, cfg: Config, layer: int, mlp: bool = True) -> Block:
    """Block `layer`'s weights; without its MLP when `mlp` is false (the traced layer needs none)."""
    fam, pre = cfg.family, prefix(tensors, cfg)
    check_shapes(tensors, cfg, shapes(cfg, pre, layer, mlp))
    p = pre + fam.block(layer)
    a = p + fam.attention + "."
    norm = lambda name: None if name is None else _norm(tensors, cfg, p + name)  # noqa: E731
    linear = lambda name: _read_linear(tensors, cfg, name)  # noqa: E731
    if fam.qkv:
        w, b = linear(a + fam.qkv)
        (wq, bq), (wk, bk), (wv, bv) = (_columns(w, b, cols) for cols in _qkv_columns(cfg))
    else:
        (wq, bq), (wk, bk), (wv, bv) = linear(a + fam.q), linear(a + fam.k), linear(a + fam.v)
    wo, bo = linear(a + fam.o)
    out = Block(norm_in=norm(fam.attn_in), q=wq, k=wk, v=wv, o=wo, bq=bq, bk=bk, bv=bv, bo=bo,
                out_norm=norm(fam.attn_out))
    if fam.qk_norm:
        out.q_norm, out.k_norm = (tensors[a + f"{x}_norm.weight"] + fam.gain_offset for x in "qk")
    if fam.sinks:
        out.sinks = tensors[a + "sinks"]
    if mlp:
        out.norm_mlp, out.mlp_out = norm(fam.mlp_in), norm(fam.mlp_out)
        if cfg.moe and cfg.moe["sparse"][layer]:
            out.moe = _moe(tensors, cfg, p + "mlp.")
        else:
            out.mlp = _mlp(tensors, cfg, p + "mlp.")
    return out


def _moe(tensors: Tensors, cfg: Config, m: str) -> dict:
    """The router (rows orientation) and a reader of one expert's matrices at a time, so that a
    layer's experts are read as they are used and let go after."""
    x = m + "experts."

    def stacked(e: int) -> dict:      # gpt-oss: experts × in × out, saved or MXFP4, with biases
        return dict(gate_up=tensors.expert(x + "gate_up_proj", e), b_gate_up=tensors.rows(x + "gate_up_proj_bias", [e])[0],
                    down=tensors.expert(x + "down_proj", e), b_down=tensors.rows(x + "down_proj_bias", [e])[0])

    def linear(e: int) -> dict:       # Qwen3-MoE: one nn.Linear per expert and matrix
        return {w: tensors[f"{x}{e}.{w}_proj.weight"].T for w in ("gate", "up", "down")}
    if cfg.family.experts == "gpt_oss":
        return dict(router=tensors[m + "router.weight"].T, b_router=tensors[m + "router.bias"], expert=stacked)
    return dict(router=tensors[m + "gate.weight"].T, b_router=None, expert=linear)


def _norm(tensors: Tensors, cfg: Config, name: str) -> dict:
    bias = tensors[name + ".bias"] if cfg.family.norm == "layer" else None
    return dict(kind=cfg.family.norm, gain=tensors[name + ".weight"] + cfg.family.gain_offset, bias=bias, eps=cfg.eps)


def _read_linear(tensors: Tensors, cfg: Config, name: str):
    """(weight in the rows orientation, in × out; bias or None when not saved)."""
    w = tensors[name + ".weight"]
    return (w if cfg.family.conv1d else w.T), (tensors[name + ".bias"] if name + ".bias" in tensors else None)


def _qkv_columns(cfg: Config) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which columns of a fused q|k|v projection are q's, k's and v's (each in head order)."""
    h, g, hd = cfg.heads, cfg.groups, cfg.head_dim
    layout = cfg.family.fused
    if layout == "blocks":
        return np.arange(h * hd), h * hd + np.arange(g * hd), (h + g) * hd + np.arange(g * hd)
    per = (h // g + 2) if layout == "groups" else 3        # heads: q, k, v of head h side by side
    cols = np.arange(g * per * hd).reshape(g, per, hd)
    q = cols[:, :-2] if layout == "groups" else cols[:, :1]
    return q.reshape(-1), cols[:, -2].reshape(-1), cols[:, -1].reshape(-1)


def _columns(w: np.ndarray, b: np.ndarray | None, cols: np.ndarray):
    return np.ascontiguousarray(w[:, cols]), (None if b is None else b[cols])


def _mlp(tensors: Tensors, cfg: Config, m: str) -> dict:
    """up, down (and gate) in the rows orientation, each with its bias or None."""
    fam = cfg.family
    out = {}
    if fam.gate_up:
        w, b = _read_linear(tensors, cfg, m + fam.gate_up)
        half = cfg.inner
        out.update(gate=w[:, :half], b_gate=None if b is None else b[:half],
                   up=w[:, half:], b_up=None if b is None else b[half:])
    elif fam.gated():
        (out["gate"], out["b_gate"]) = _read_linear(tensors, cfg, m + fam.mlp[0])
    if not fam.gate_up:
        (out["up"], out["b_up"]) = _read_linear(tensors, cfg, m + fam.mlp[-2])
    (out["down"], out["b_down"]) = _read_linear(tensors, cfg, m + fam.mlp[-1])
    return out
