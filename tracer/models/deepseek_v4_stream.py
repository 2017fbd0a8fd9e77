"""DeepSeek V4's residual through its blocks: N streams a token (the embedding copied N times),
mixed by hyper-connections into the `x` each attention and MLP reads and expanded back after it;
MLPs of routed and shared experts with clamped SwiGLU, routed by a frozen token → experts table
(`hash_moe` layers) or by sqrt(softplus) scores and a load-balancing bias (`moe` layers)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

from ..errors import ScenarioError
from ..mechanisms.hyper import connections as hc
from ..readfile import CONFIG_BYTES, checkpoint_json
from . import deepseek_v4_block as block
from .experts import silu
from .experts import mixture
from .sparse_config import read_v4
from .weights import Tensors


def open_checkpoint(folder) -> tuple[Tensors, object, str]:
    """(tensors, sizes, the prefix before `layers.`): `model.` as transformers saves it, none as
    DeepSeek publishes it."""
    folder = Path(folder)
    c = read_v4(checkpoint_json(folder / "config.json", CONFIG_BYTES, "the model's config.json"))
    t = Tensors(folder)
    for embed, pre in (("model.embed_tokens.weight", "model."), ("embed.weight", "")):
        if embed in t:
            return t, c, pre
    raise ScenarioError("embed.weight", "is missing; expected the token embeddings of a deepseek_v4 checkpoint",
                        str(folder))


def _mix(t: Tensors, c, at: str, streams: np.ndarray):
    return hc.mixes(streams, t[at + "_fn"], t[at + "_base"], t[at + "_scale"], c.hc["iters"], c.hc["eps"], c.eps)


def scores_of(logits: np.ndarray, scoring: str) -> np.ndarray:
    """The router's scores: sqrt(softplus(l)) (V4's), softmax over the experts, or sigmoid."""
    if scoring == "sqrtsoftplus":
        return np.sqrt(np.logaddexp(0.0, logits))
    if scoring == "sigmoid":
        return 0.5 * (1.0 + np.tanh(logits / 2))
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def route(h: np.ndarray, t: Tensors, c, at: str, ids: list[int], hashed: bool) -> tuple[np.ndarray, np.ndarray]:
    """(weights, experts), token × top_k: the experts from the hash table (tid2eid[token id]) or the
    best scores + bias; their weights the scores renormalised, times routed_scaling_factor."""
    r = c.router
    s = scores_of(h @ t[at + "gate.weight"].T, r["scoring"])
    if hashed:
        chosen = _hash_table(t, at + "gate.tid2eid", r)[np.asarray(ids)]
    else:
        bias = t[at + "gate.bias"] if at + "gate.bias" in t else 0.0
        chosen = np.argsort(-(s + bias), axis=-1, kind="stable")[:, : r["top_k"]]
    w = np.take_along_axis(s, chosen, axis=-1)
    return w / (w.sum(axis=-1, keepdims=True) + 1e-20) * r["routed_scaling_factor"], chosen


def _hash_table(t: Tensors, name: str, r: dict) -> np.ndarray:
    """tid2eid (vocabulary × top_k integers), read with safetensors: attnsim's reader takes floats."""
    from safetensors import safe_open
    if name not in t:
        raise ScenarioError(name, "is missing; expected the hash layer's token → experts table", str(t.folder))
    with safe_open(t.where(name), framework="numpy") as f:
        table = f.get_tensor(name)
    if table.ndim != 2 or table.shape[1] != r["top_k"] or table.dtype.kind not in "iu" or \
            table.min() < 0 or table.max() >= r["experts"]:
        raise ScenarioError(name, f"expected vocabulary × {r['top_k']} expert numbers below {r['experts']}, got "
                            f"{table.dtype} {table.shape}", t.where(name))
    return table


def _swiglu(h: np.ndarray, t: Tensors, at: str, limit: float) -> np.ndarray:
    """w2(silu(min(w1·h, limit)) · clip(w3·h, ±limit)): gate capped above, up clamped both ways."""
    gate = np.minimum(h @ t[at + "w1.weight"].T, limit)
    up = np.clip(h @ t[at + "w3.weight"].T, -limit, limit)
    return (silu(gate) * up) @ t[at + "w2.weight"].T


def mlp(h: np.ndarray, t: Tensors, c, pre: str, i: int, ids: list[int]) -> np.ndarray:
    at, limit = f"{pre}layers.{i}.ffn.", c.router["limit"]
    weights, chosen = route(h, t, c, at, ids, c.mlp[i] == "hash_moe")
    out = mixture(h, chosen, weights, lambda e, rows: _swiglu(rows, t, f"{at}experts.{e}.", limit))
    return out + _swiglu(h, t, at + "shared_experts.", limit)


def run(folder, ids: list[int], upto: int) -> list[dict]:
    """Layers 0 … upto on the tokens `ids`: each layer's attention intermediates (block.layer()),
    with `streams` (token × N × d, entering), the hyper-connection's `hc.pre`, `hc.post`, `hc.comb`
    (how the streams were mixed into x and will take the output back) and `streams_after`."""
    return list(each_layer(folder, ids, upto))


def each_layer(folder, ids: list[int], upto: int) -> Iterator[dict]:
    """run()'s layers one at a time, as each is done (the model view holds one layer's, not all)."""
    t, c, pre = open_checkpoint(folder)
    embed = t.rows(pre + "embed_tokens.weight" if pre else "embed.weight", list(ids))
    streams = np.repeat(embed[:, None, :], c.hc["streams"], axis=1)
    for i in range(upto + 1):
        p = f"{pre}layers.{i}."
        pre_w, post, comb = _mix(t, c, p + "hc_attn", streams)
        x = hc.collapse(streams, pre_w)
        got = block.layer(x, block.rms(x, t[p + "attn_norm.weight"], c.eps), block.read_attention(t, c, pre, i), c, i)
        got.update({"streams": streams, "hc.pre": pre_w, "hc.post": post, "hc.comb": comb})
        streams = got["streams_after"] = hc.expand(streams, got["out"], post, comb)
        yield got
        del got
        if i < upto:
            pre_w, post, comb = _mix(t, c, p + "hc_ffn", streams)
            y = hc.collapse(streams, pre_w)
            streams = hc.expand(streams, mlp(block.rms(y, t[p + "ffn_norm.weight"], c.eps), t, c, pre, i, ids),
                                post, comb)
