"""A traced layer of a DeepSeek V4 checkpoint as from_arrays keywords: the stream x entering it (the
earlier blocks and the hyper-connections run in deepseek_v4_stream), the streams and their mixes, the
compressed entries and the indexer's parts computed by its own formulas (deepseek_v4_block), the
layer's weights (W_QA, W_QB, W_KV, their gains, the grouped W_O) and the sinks; the `compressed`
section's reader builds the mask from them."""
from __future__ import annotations

import numpy as np

from ..checks import kind
from ..errors import ScenarioError
from ..mechanisms.indexer import rotary
from .deepseek_v4_block import SPARSE
from .sparse_config import read_v4
from .tokens import encode


def is_v4(data: dict) -> bool:
    return data.get("model_type") == "deepseek_v4"


def header(c, layer: int, entries: int) -> str:
    """`compressed_sparse_attention (m = 4, top 2 of 3 entries by its indexer; window 4)`."""
    kind_ = c.kinds[layer]
    if kind_ == "sliding_attention":
        return f"{kind_} (window {c.window})"
    chosen = f"top {c.index['topk']} of {entries} entries by its indexer" if kind_ == SPARSE else \
        f"every entry ({entries})"
    return f"{kind_} (m = {c.rates[kind_]}, {chosen}; window {c.window})"


def layer_arrays(folder, data: dict, text: str, layer, label: str, what: str) -> dict:
    """from_arrays keywords of layer `layer` of the checkpoint in `folder` on `text`."""
    from ..model_view.deepseek_v4 import check
    from . import deepseek_v4_stream as stream
    c = read_v4(data)
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < c.layers:
        raise ScenarioError("model.layer", f"expected a layer from 0 to {c.layers - 1} (the model has {c.layers}), "
                            f"got {kind(layer)}")
    ids, pieces = encode(folder, text, data.get("max_position_embeddings", 1 << 20))
    check(folder, len(ids))
    t, _, pre = stream.open_checkpoint(folder)
    at = f"{pre}layers.{layer}."
    p = stream.run(folder, ids, layer)[-1]
    d, n = c.head_dim, len(ids)
    m = c.rates.get(c.kinds[layer])
    n_streams = c.hc["streams"]
    section = dict(kind=c.kinds[layer], window=c.window, m=m, topk=c.index["topk"], streams=n_streams,
                   pre=p["hc.pre"], x_streams=p["streams"].reshape(len(ids) * n_streams, -1), post=p["hc.post"],
                   comb=p["hc.comb"], w_qa=t[at + "attn.wq_a.weight"].T, q_gain=t[at + "attn.q_norm.weight"],
                   w_qb=_per_head(t[at + "attn.wq_b.weight"], c.heads), eps=c.eps,
                   theta=p["theta"], w_kv=t[at + "attn.wkv.weight"].T, kv_gain=t[at + "attn.norm.weight"],
                   groups=c.groups, w_a=t[at + "attn.wo_a.weight"], w_b=t[at + "attn.wo_b.weight"])
    if m is not None:   # the compressor: C and Z of every token, the bias of each window position, the gain
        comp = at + "attn.compressor."
        section["pool"] = dict(w_c=t[comp + "wkv.weight"].T, w_z=t[comp + "wgate.weight"].T, bias=t[comp + "ape"],
                               gain=t[comp + "norm.weight"],
                               theta=rotary.angles(c.rope["compress"], np.arange(n // m) * m, c.rope_dims))
    if c.kinds[layer] == SPARSE:
        section["index"] = {"q": p["idx.q"], "k": p["idx.k"], "w": p["idx.w"], "scale": c.index["dim"] ** -0.5}
    streams, spread = c.hc["streams"], f"pre {p['hc.pre'].min():.3g} … {p['hc.pre'].max():.3g}"
    said = header(c, layer, n // m if m else 0)
    return dict(x=p["x"], tokens=pieces, compressed=section, sinks=t[at + "attn.attn_sink"],
                norm_in=dict(kind="rms", gain=t[at + "attn_norm.weight"], eps=c.eps),
                name=f"{label}_layer{layer}",
                title=f"{label}, layer {layer} ({said}): {len(ids)} tokens, d_model {c.d_model}, {c.heads} heads of "
                      f"{d}, one key/value head; x = Σ_j pre_j·X_j over {streams} streams",
                description=f"Layer {layer} of {c.layers} of {what}. x: the {streams} residual streams entering "
                            f"layer {layer} mixed by its hyper-connection, x = Σ_j pre_j·X_j ({spread}), computed by "
                            f"running the earlier blocks; this layer is {said}.")


def _per_head(w: np.ndarray, heads: int) -> np.ndarray:
    """W_QB as saved, (heads·D) × q_rank, as heads × q_rank × D."""
    return np.ascontiguousarray(w.reshape(heads, -1, w.shape[1]).transpose(0, 2, 1))


def described(data: dict, path: str | None, text: str, layer: int, heads=None) -> dict:
    """origin()'s dict for a DeepSeek V4 checkpoint (each layer's kind from its config)."""
    kinds = read_v4(data).kinds
    return {"path": path, "text": text, "layer": layer, "layers": len(kinds),
            "heads": None if heads is None else list(heads), "kind": kinds[layer], "kinds": list(kinds)}
