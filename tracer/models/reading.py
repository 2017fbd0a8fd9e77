"""Reading a checkpoint's tensors by name, as every family and the experts need it: the names'
prefix, each tensor's shape and dtype checked against config.json, a norm's and a projection's
tensors in the rows orientation (Q = X·W_Q)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ScenarioError
from . import fp8, mxfp4
from .weights import DTYPES

if TYPE_CHECKING:
    from .config import Config
    from .weights import Tensors


def prefix(tensors: Tensors, cfg: Config) -> str:
    """What the checkpoint puts before the names (`transformer.`, `model.`, or nothing)."""
    tail = cfg.family.embed + ".weight"
    for name in tensors.names:
        if name.endswith(tail) and (name == tail or name.endswith("." + tail)):
            return name[: -len(tail)]
    raise ScenarioError(tail, f"is missing; expected the token embeddings of a {cfg.model_type} checkpoint",
                        str(tensors.folder))


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
            raise ScenarioError(name, f"has shape {shape_text(got)}; expected {shape_text(shape)}, as config.json's "
                                "sizes give", tensors.where(name))


def shape_text(shape: tuple) -> str:
    return "(" + ", ".join(map(str, shape)) + ")"


def norm(tensors: Tensors, cfg: Config, name: str) -> dict:
    """A norm's spec (ops.norm's): its kind, gain (Gemma's stored gain − 1 made 1 + w), bias and eps."""
    bias = tensors[name + ".bias"] if cfg.family.norm == "layer" else None
    return dict(kind=cfg.family.norm, gain=tensors[name + ".weight"] + cfg.family.gain_offset, bias=bias, eps=cfg.eps)


def linear(tensors: Tensors, cfg: Config, name: str):
    """(weight in the rows orientation, in × out; bias or None when not saved)."""
    w = tensors[name + ".weight"]
    return (w if cfg.family.conv1d else w.T), (tensors[name + ".bias"] if name + ".bias" in tensors else None)
