"""What the 2026 families' blocks share, in float64 NumPy: reading a checkpoint's tensors under its
prefix, norms with and without a gain, rotary positions in their layouts, the masks, softmax
attention at any scale, the activations and the gated MLP; and `Layer`, what one layer's
attention did, as a test (or the trace) reads it."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from ...mechanisms.chunked.formula import allowed as chunked_allowed
from ..families import ACTIVATIONS
from ..ops import activate


@dataclass
class Layer:
    """One layer's attention, as the family computes it. x is the residual stream entering the
    layer (Gemma 3n: its streams × n × d_model); h what the attention reads (n × d_model); q the
    queries as the scores use them (heads × n × d_k), k and v the keys and values attended
    (groups × n × d; the source layer's under shared KV); weights heads × n × n; out the
    attention's output after W_O (n × d_model), before any norm or residual."""
    x: np.ndarray
    h: np.ndarray
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    weights: np.ndarray
    out: np.ndarray
    source: int                      # the layer whose keys and values were read (itself: its own)
    extra: dict = field(default_factory=dict)   # what only this family has (the temperature τ…)


class Weights:
    """A checkpoint's tensors by their name after the prefix the checkpoint puts before them
    (`model.`, `model.language_model.`…), found as the place of `embed`'s table. `source` maps
    full names to arrays (a folder's `Tensors`, or a dict)."""

    def __init__(self, source, embed: str = "embed_tokens.weight"):
        self.source = source
        names = list(source.names) if hasattr(source, "names") else list(source)
        hits = [n[: -len(embed)] for n in names if n == embed or n.endswith("." + embed)]
        if not hits:
            raise KeyError(f"{embed}: missing; expected the token embeddings")
        self.prefix = min(hits, key=len)      # the text model's, not a vision tower's

    def __contains__(self, name: str) -> bool:
        return self.prefix + name in self.source

    def __getitem__(self, name: str) -> np.ndarray:
        return np.asarray(self.source[self.prefix + name], dtype=np.float64)

    def get(self, name: str):
        return self[name] if name in self else None

    def linear(self, name: str) -> np.ndarray:
        """An nn.Linear's weight in the rows orientation (in × out: y = x·W)."""
        return self[name + ".weight"].T

    def rows(self, name: str, ids) -> np.ndarray:
        if hasattr(self.source, "rows"):
            return np.asarray(self.source.rows(self.prefix + name, list(ids)), dtype=np.float64)
        return self[name][np.asarray(ids)]


def rms(x: np.ndarray, eps: float, gain: np.ndarray | None = None) -> np.ndarray:
    """x ÷ √(mean x² + ε) over the last axis, times the gain when there is one."""
    y = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    return y if gain is None else y * gain


def heads(m: np.ndarray, count: int) -> np.ndarray:
    """n × (count·d) → count × n × d (head h's columns h·d … (h+1)·d)."""
    return m.reshape(m.shape[0], count, -1).transpose(1, 0, 2)


def side_by_side(m: np.ndarray) -> np.ndarray:
    """count × n × d → n × (count·d): the heads' outputs before W_O."""
    return m.transpose(1, 0, 2).reshape(m.shape[1], -1)


def turn(m: np.ndarray, inv_freq: np.ndarray, style: str = "half", factor: float = 1.0,
         positions: np.ndarray | None = None) -> np.ndarray:
    """Rotary positions on m (… × n × d). `half`: among the first r = 2·len(inv_freq) features the
    pair (i, i + r/2) turns by p·θ_i (a θ of 0 leaves its pair as it is: Gemma 4's proportional
    rotary); `interleaved`: the pair (2i, 2i + 1) (Llama 4, DeepSeek). `factor` multiplies cos
    and sin (yarn's attention factor). A negative θ turns the other way (nanochat)."""
    n = m.shape[-2]
    p = np.arange(n, dtype=np.float64) if positions is None else positions
    angle = p[:, None] * inv_freq[None, :]
    cos, sin = np.cos(angle) * factor, np.sin(angle) * factor
    r = 2 * len(inv_freq)
    if style == "half":
        a, b = m[..., : r // 2], m[..., r // 2: r]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin, m[..., r:]], axis=-1)
    out = m.copy()
    a, b = m[..., 0:r:2], m[..., 1:r:2]
    out[..., 0:r:2], out[..., 1:r:2] = a * cos - b * sin, b * cos + a * sin
    return out


def allowed(n: int, kind: str, span: int | None = None) -> np.ndarray:
    """query × key booleans: `causal`, `sliding` (the last W keys: i − j < W) or `chunked`
    (the earlier keys of the query's own chunk of C)."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    if kind == "chunked":
        return chunked_allowed(n, span)
    if kind == "sliding":
        return (j <= i) & (i - j < span)
    return j <= i


def attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, ok: np.ndarray, scale: float) -> tuple:
    """Softmax attention of every query head: q (heads × n × d_k) against k and v (groups × n ×
    d); query head h reads group h // (heads/groups). Returns (weights, z), z heads × n × d_v."""
    share = q.shape[0] // k.shape[0]
    k, v = np.repeat(k, share, axis=0), np.repeat(v, share, axis=0)
    s = np.einsum("hid,hjd->hij", q, k) * scale
    s = np.where(ok[None], s, -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    return w, w @ v


def activation(name: str):
    """The MLPs' activations by config.json's name."""
    if name not in ACTIVATIONS:
        raise KeyError(f"hidden_act: {name!r} is not supported")
    return functools.partial(activate, activation=ACTIVATIONS[name])


def gated(x: np.ndarray, w: Weights, at: str, act) -> np.ndarray:
    """down(act(x·W_gate) · x·W_up), nn.Linear gate_proj, up_proj, down_proj under `at`."""
    return (act(x @ w.linear(at + "gate_proj")) * (x @ w.linear(at + "up_proj"))) @ w.linear(at + "down_proj")


def blocks(source, cfg: dict, ids: list[int], upto: int | None, attention, mlp):
    """Each Layer of a pre-norm decoder (Llama 4's, Mistral 4's) on the token ids, 0 … upto (all by
    default): attention(w, i, normed x, cfg) → Layer, then x + the MLP's mlp(w, i, normed x, cfg); a
    layer is handed out before its MLP runs, so the last one asked for runs none."""
    w = Weights(source)
    x = w.rows("embed_tokens.weight", ids)
    for i in range(cfg["layers"] if upto is None else upto + 1):
        at = f"layers.{i}."
        att = attention(w, i, rms(x, cfg["eps"], w[at + "input_layernorm.weight"]), cfg)
        att.x = x
        yield att
        x = x + att.out
        x = x + mlp(w, i, rms(x, cfg["eps"], w[at + "post_attention_layernorm.weight"]), cfg)
