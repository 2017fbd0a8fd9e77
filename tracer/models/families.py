"""Where each family keeps its tensors: one block's weights read into the same shapes for GPT-2
and the Llama family (rows orientation: Q = X·W_Q), so that one forward serves both."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ScenarioError
from .config import Config
from .weights import DTYPES, Tensors


@dataclass
class Block:
    """One transformer block. q is heads × d_model × head_dim, k and v groups × d_model × head_dim,
    o (heads·head_dim) × d_model; biases are per head (or group) vectors, or None."""
    norm_in: dict          # {"kind": "layer" | "rms", "gain", "bias", "eps"}
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    o: np.ndarray
    bq: np.ndarray | None
    bk: np.ndarray | None
    bv: np.ndarray | None
    bo: np.ndarray | None
    norm_mlp: dict
    mlp: dict | None       # GPT-2: up, b_up, down, b_down; Llama: gate, up, down (+ biases or None)


def prefix(tensors: Tensors, cfg: Config) -> str:
    """What the checkpoint puts before the names (`transformer.`, `model.`, or nothing)."""
    tail = "wte.weight" if cfg.family == "gpt2" else "embed_tokens.weight"
    for name in tensors.names:
        if name.endswith(tail) and (name == tail or name.endswith("." + tail)):
            return name[: -len(tail)]
    raise ScenarioError(tail, f"is missing; expected the token embeddings of a {cfg.model_type} checkpoint",
                        str(tensors.folder))


def shapes(cfg: Config, pre: str, i: int, mlp: bool) -> dict[str, tuple[int, ...]]:
    """Every tensor block i reads, with the shape config.json implies (biases of the Llama family
    only where saved), so that a broken checkpoint is refused by name before any arithmetic."""
    d, inner, hd = cfg.d_model, cfg.inner, cfg.head_dim
    if cfg.family == "gpt2":
        p = f"{pre}h.{i}."
        want = {p + "ln_1.weight": (d,), p + "ln_1.bias": (d,), p + "attn.c_attn.weight": (d, 3 * d),
                p + "attn.c_attn.bias": (3 * d,), p + "attn.c_proj.weight": (d, d), p + "attn.c_proj.bias": (d,)}
        if mlp:
            want.update({p + "ln_2.weight": (d,), p + "ln_2.bias": (d,), p + "mlp.c_fc.weight": (d, inner),
                         p + "mlp.c_fc.bias": (inner,), p + "mlp.c_proj.weight": (inner, d),
                         p + "mlp.c_proj.bias": (d,)})
        return want
    p, q, kv = f"{pre}layers.{i}.", cfg.heads * hd, cfg.groups * hd
    want = {p + "input_layernorm.weight": (d,), p + "self_attn.q_proj.weight": (q, d),
            p + "self_attn.k_proj.weight": (kv, d), p + "self_attn.v_proj.weight": (kv, d),
            p + "self_attn.o_proj.weight": (d, q), p + "self_attn.q_proj.bias": (q,),
            p + "self_attn.k_proj.bias": (kv,), p + "self_attn.v_proj.bias": (kv,), p + "self_attn.o_proj.bias": (d,)}
    if mlp:
        want.update({p + "post_attention_layernorm.weight": (d,), p + "mlp.gate_proj.weight": (inner, d),
                     p + "mlp.up_proj.weight": (inner, d), p + "mlp.down_proj.weight": (d, inner)})
    return want


def check_shapes(tensors: Tensors, want: dict, optional=lambda name: name.endswith(".bias")) -> None:
    for name, shape in want.items():
        if optional(name) and name not in tensors:
            continue
        got, dtype = tensors.shape(name), tensors.dtype(name)
        if dtype not in DTYPES:
            raise ScenarioError(name, f"has dtype {dtype}; expected float64, float32, float16 or bfloat16 weights",
                                tensors.where(name))
        if got != shape:
            raise ScenarioError(name, f"has shape {_shape(got)}; expected {_shape(shape)}, as config.json's sizes "
                                "give", tensors.where(name))


def check_all(tensors: Tensors, cfg: Config, layer: int) -> None:
    """Every tensor the layer needs (embeddings, blocks 0 … layer) against config.json, before
    any arithmetic: a broken block is named at once, not after the blocks before it have run."""
    pre = prefix(tensors, cfg)
    for i in range(layer + 1):
        check_shapes(tensors, shapes(cfg, pre, i, i < layer), optional=_optional(cfg))


def _shape(shape: tuple) -> str:
    return "(" + ", ".join(map(str, shape)) + ")"


def embed(tensors: Tensors, cfg: Config, ids: list[int]) -> np.ndarray:
    """The residual stream entering block 0: token embeddings (plus learned positions for GPT-2)."""
    pre = prefix(tensors, cfg)
    name = pre + ("wte.weight" if cfg.family == "gpt2" else "embed_tokens.weight")
    table = tensors.shape(name)
    if len(table) != 2 or table[1] != cfg.d_model or table[0] < 1:
        raise ScenarioError(name, f"has shape {_shape(table)}; expected (vocabulary, {cfg.d_model}), as "
                            "config.json's sizes give", tensors.where(name))
    if cfg.family == "gpt2":
        places = tensors.shape(pre + "wpe.weight")
        if len(places) != 2 or places[1] != cfg.d_model or places[0] < len(ids):
            raise ScenarioError(pre + "wpe.weight", f"has shape {_shape(places)}; expected ({len(ids)} or more "
                                f"positions, {cfg.d_model}) for the text's {len(ids)} tokens",
                                tensors.where(pre + "wpe.weight"))
    vocab = table[0]
    if max(ids) >= vocab:
        raise ScenarioError("tokenizer.json", f"gives token id {max(ids)}; expected ids below the model's "
                            f"vocabulary of {vocab}", str(tensors.folder))
    x = tensors.rows(name, ids)
    if cfg.family == "gpt2":
        x += tensors.rows(pre + "wpe.weight", range(len(ids)))
    return x


def block(tensors: Tensors, cfg: Config, layer: int, mlp: bool = True) -> Block:
    """Block `layer`'s weights; without its MLP when `mlp` is false (the traced layer needs none)."""
    pre = prefix(tensors, cfg)
    check_shapes(tensors, shapes(cfg, pre, layer, mlp), optional=_optional(cfg))
    return (_gpt2 if cfg.family == "gpt2" else _llama)(tensors, cfg, pre, layer, mlp)


def _optional(cfg: Config):
    """GPT-2 saves every bias; the Llama family only where the model has them (Qwen2's q, k, v)."""
    return (lambda name: False) if cfg.family == "gpt2" else (lambda name: name.endswith(".bias"))


def _heads(w: np.ndarray, count: int) -> np.ndarray:
    """d_model × (count·head_dim) → count × d_model × head_dim (head h's columns h·hd … (h+1)·hd)."""
    d, width = w.shape
    return np.ascontiguousarray(w.reshape(d, count, width // count).transpose(1, 0, 2))


def _split(b: np.ndarray | None, count: int) -> np.ndarray | None:
    return None if b is None else b.reshape(count, -1)


def _gpt2(t: Tensors, cfg: Config, pre: str, i: int, mlp: bool) -> Block:
    p, d, h = f"{pre}h.{i}.", cfg.d_model, cfg.heads
    w, b = t[p + "attn.c_attn.weight"], t[p + "attn.c_attn.bias"]   # Conv1D: (in, out), q|k|v fused
    norm = lambda name: dict(kind="layer", gain=t[p + name + ".weight"], bias=t[p + name + ".bias"],  # noqa: E731
                             eps=cfg.eps)
    return Block(norm_in=norm("ln_1"),
                 q=_heads(w[:, :d], h), k=_heads(w[:, d:2 * d], h), v=_heads(w[:, 2 * d:], h),
                 o=t[p + "attn.c_proj.weight"], bq=_split(b[:d], h), bk=_split(b[d:2 * d], h),
                 bv=_split(b[2 * d:], h), bo=t[p + "attn.c_proj.bias"], norm_mlp=norm("ln_2"),
                 mlp=dict(up=t[p + "mlp.c_fc.weight"], b_up=t[p + "mlp.c_fc.bias"],
                          down=t[p + "mlp.c_proj.weight"], b_down=t[p + "mlp.c_proj.bias"]) if mlp else None)


def _llama(t: Tensors, cfg: Config, pre: str, i: int, mlp: bool) -> Block:
    p = f"{pre}layers.{i}."

    def linear(name: str):
        """nn.Linear keeps (out, in); the rows orientation wants (in, out). Bias only if saved."""
        bias = p + name + ".bias"
        return t[p + name + ".weight"].T, (t[bias] if bias in t else None)

    (wq, bq), (wk, bk), (wv, bv) = linear("self_attn.q_proj"), linear("self_attn.k_proj"), linear("self_attn.v_proj")
    wo, bo = linear("self_attn.o_proj")
    norm = lambda name: dict(kind="rms", gain=t[p + name + ".weight"], bias=None, eps=cfg.eps)  # noqa: E731
    return Block(norm_in=norm("input_layernorm"),
                 q=_heads(wq, cfg.heads), k=_heads(wk, cfg.groups), v=_heads(wv, cfg.groups), o=wo,
                 bq=_split(bq, cfg.heads), bk=_split(bk, cfg.groups), bv=_split(bv, cfg.groups), bo=bo,
                 norm_mlp=norm("post_attention_layernorm"),
                 mlp=_swiglu(linear) if mlp else None)


def _swiglu(linear) -> dict:
    (gate, b_gate), (up, b_up), (down, b_down) = linear("mlp.gate_proj"), linear("mlp.up_proj"), linear("mlp.down_proj")
    return dict(gate=gate, b_gate=b_gate, up=up, b_up=b_up, down=down, b_down=b_down)
