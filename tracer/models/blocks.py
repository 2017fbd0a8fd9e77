"""One block's tensors, read as its family declares them and put into the same shapes for every
family (rows orientation: Q = X·W_Q), so that one forward serves them all: fused q, k, v and
gate/up tensors split, Conv1D and nn.Linear orientations made one, Gemma's gains made 1 + w."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ScenarioError
from . import deepseek
from .config import Config
from .reading import check_shapes, linear, norm, prefix, shape_text
from .weights import Tensors


@dataclass
class Block:
    """One transformer block, rows orientation: q is d_model × (heads·head_dim), head h's columns
    h·head_dim … (h+1)·head_dim; k and v d_model × (groups·head_dim); o (heads·head_dim) × d_model;
    biases are vectors of those widths, or None. A norm is {"kind": "layer" | "rms", "gain",
    "bias", "eps"} or None where the family has none."""
    norm_in: dict | None
    q: np.ndarray | None                 # None under latent attention: its own weights are `latent`
    k: np.ndarray | None
    v: np.ndarray | None
    o: np.ndarray
    bq: np.ndarray | None
    bk: np.ndarray | None
    bv: np.ndarray | None
    bo: np.ndarray | None
    latent: dict | None = None           # multi-head latent attention's weights (deepseek.read_attention)
    q_norm: np.ndarray | None = None     # QK-norm gains: head_dim, or heads·head_dim for OLMo 2's
    k_norm: np.ndarray | None = None
    out_norm: dict | None = None         # a norm of the attention's output before the residual
    norm_mlp: dict | None = None
    mlp: dict | None = None              # up, b_up, down, b_down, and gate, b_gate when gated
    mlp_out: dict | None = None
    sinks: np.ndarray | None = None      # one sink logit per query head (gpt-oss)
    moe: dict | None = None              # router, b_router, bias, expert(e) → that expert's matrices, shared
    #                                      (the family's Experts.tensors, each expert checked as it is read)


def _linear(cfg: Config, name: str, out: int, inp: int) -> dict[str, tuple]:
    """A projection's weight and bias as saved: nn.Linear (out, in), GPT-2's Conv1D (in, out)."""
    return {name + ".weight": (inp, out) if cfg.family.conv1d else (out, inp), name + ".bias": (out,)}


def shapes(cfg: Config, pre: str, i: int, mlp: bool) -> dict[str, tuple[int, ...]]:
    """Every tensor block i reads, with the shape config.json implies, so that a broken
    checkpoint is refused by name before any arithmetic (biases are checked where saved)."""
    fam, d = cfg.family, cfg.d_model
    p = pre + fam.block(i)
    want = {}
    for name in (fam.attn_in, fam.attn_out) + ((fam.mlp_in, fam.mlp_out) if mlp else ()):
        if name is not None:
            want.update({p + name + ".weight": (d,)} if fam.norm == "rms" else {p + name + ".weight": (d,),
                                                                                p + name + ".bias": (d,)})
    want.update(deepseek.attention_shapes(cfg, p) if fam.latent else _attention_shapes(cfg, p + fam.attention + "."))
    if mlp and cfg.moe and cfg.moe["sparse"][i]:
        want.update(fam.experts.shapes(cfg, p + "mlp."))
    elif mlp:
        m = p + "mlp."
        if fam.gate_up:
            want.update(_linear(cfg, m + fam.gate_up, 2 * cfg.inner, d))
        for name in fam.mlp[:-1]:
            want.update(_linear(cfg, m + name, cfg.inner, d))
        want.update(_linear(cfg, m + fam.mlp[-1], d, cfg.inner))
    return want


def _attention_shapes(cfg: Config, a: str) -> dict[str, tuple[int, ...]]:
    """The projections of a block's attention (a: its prefix), its QK-norm's gains and its sinks."""
    fam, d, hd = cfg.family, cfg.d_model, cfg.head_dim
    q, kv = cfg.heads * hd, cfg.groups * hd
    want = {}
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
    return want


def check_all(tensors: Tensors, cfg: Config, layer: int) -> None:
    """Every tensor the layer needs (blocks 0 … layer) against config.json, before any
    arithmetic: a broken block is named at once, not after the blocks before it have run."""
    pre = prefix(tensors, cfg)
    for i in range(layer + 1):
        check_shapes(tensors, cfg, shapes(cfg, pre, i, i < layer))


def embed(tensors: Tensors, cfg: Config, ids: list[int]) -> np.ndarray:
    """The token embeddings (× √d_model for Gemma), plus learned positions (GPT-2); BLOOM's
    stream then passes embed_norm's norm."""
    fam, pre = cfg.family, prefix(tensors, cfg)
    name = pre + fam.embed + ".weight"
    table = tensors.shape(name)
    if len(table) != 2 or table[1] != cfg.d_model or table[0] < 1:
        raise ScenarioError(name, f"has shape {shape_text(table)}; expected (vocabulary, {cfg.d_model}), as "
                            "config.json's sizes give", tensors.where(name))
    if fam.positions_table:
        places = tensors.shape(pre + fam.positions_table + ".weight")
        if len(places) != 2 or places[1] != cfg.d_model or places[0] < len(ids):
            raise ScenarioError(pre + fam.positions_table + ".weight", f"has shape {shape_text(places)}; expected "
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
    return norm(tensors, cfg, pre + fam.embed_norm)


def block(tensors: Tensors, cfg: Config, layer: int, mlp: bool = True) -> Block:
    """Block `layer`'s weights; without its MLP when `mlp` is false (the traced layer needs none)."""
    fam, pre = cfg.family, prefix(tensors, cfg)
    check_shapes(tensors, cfg, shapes(cfg, pre, layer, mlp))
    p = pre + fam.block(layer)
    normed = lambda name: None if name is None else norm(tensors, cfg, p + name)  # noqa: E731
    out = _latent_block(tensors, cfg, layer) if fam.latent else _attention(tensors, cfg, p + fam.attention + ".")
    out.norm_in, out.out_norm = normed(fam.attn_in), normed(fam.attn_out)
    if mlp:
        out.norm_mlp, out.mlp_out = normed(fam.mlp_in), normed(fam.mlp_out)
        if cfg.moe and cfg.moe["sparse"][layer]:
            out.moe = _moe(tensors, cfg, p + "mlp.")
        else:
            out.mlp = _mlp(tensors, cfg, p + "mlp.")
    return out


def _attention(tensors: Tensors, cfg: Config, a: str) -> Block:
    """A block's attention weights: q, k, v (split from a fused tensor), W_O, QK-norm's gains, sinks."""
    fam = cfg.family
    if fam.qkv:
        w, b = linear(tensors, cfg, a + fam.qkv)
        (wq, bq), (wk, bk), (wv, bv) = (_columns(w, b, cols) for cols in _qkv_columns(cfg))
    else:
        (wq, bq), (wk, bk), (wv, bv) = (linear(tensors, cfg, a + name) for name in (fam.q, fam.k, fam.v))
    wo, bo = linear(tensors, cfg, a + fam.o)
    out = Block(norm_in=None, q=wq, k=wk, v=wv, o=wo, bq=bq, bk=bk, bv=bv, bo=bo)
    if fam.qk_norm:
        out.q_norm, out.k_norm = (tensors[a + f"{x}_norm.weight"] + fam.gain_offset for x in "qk")
    if fam.sinks:
        out.sinks = tensors[a + "sinks"]
    return out


def _latent_block(tensors: Tensors, cfg: Config, layer: int) -> Block:
    """A block whose attention is latent (DeepSeek's): its weights whole in `latent`."""
    w = deepseek.read_attention(tensors, cfg, layer)
    return Block(norm_in=None, q=None, k=None, v=None, o=w["o"], bq=None, bk=None, bv=None, bo=w["bo"], latent=w)


def _moe(tensors: Tensors, cfg: Config, m: str) -> dict:
    """The router (rows orientation) and a reader of one expert's matrices at a time (each checked
    against config.json as it is read), so that a layer's experts are read as they are used and let
    go after: the family's Experts declaration says what its tensors are."""
    experts = cfg.family.experts
    got = experts.tensors(tensors, cfg, m)
    read = got["expert"]

    def expert(e: int) -> dict:
        check_shapes(tensors, cfg, experts.expert_shapes(cfg, m, e))
        return read(e)
    return dict(got, expert=expert)


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
        w, b = linear(tensors, cfg, m + fam.gate_up)
        half = cfg.inner
        out.update(gate=w[:, :half], b_gate=None if b is None else b[:half],
                   up=w[:, half:], b_up=None if b is None else b[half:])
    elif fam.gated():
        (out["gate"], out["b_gate"]) = linear(tensors, cfg, m + fam.mlp[0])
    if not fam.gate_up:
        (out["up"], out["b_up"]) = linear(tensors, cfg, m + fam.mlp[-2])
    (out["down"], out["b_down"]) = linear(tensors, cfg, m + fam.mlp[-1])
    return out
