"""One layer of a checkpoint as the keyword arguments of `tracer.from_arrays`: the tokens of the
text, the residual stream entering the layer (the earlier blocks run in NumPy) and its weights."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .. import memory
from ..checks import kind, unknown
from ..errors import ScenarioError
from ..mechanisms import MECHANISMS
from . import deepseek, deepseek_v4_layer, dsa_layer, hybrid_layer
from .blocks import block, check_all, embed, embed_norm
from .config import Config, config_json, config_of, read_config
from .forward import run_block
from .ops import norm
from .hub import find_checkpoint
from .tokens import encode
from .dense2026 import traced
from .dense2026.settings import text_config
from .weights import Tensors

SECTION_KEYS = ("path", "text", "layer", "heads")
TOP_KEYS = ("name", "title", "description", "arithmetic", "model")


def layer_arrays(path, text: str, layer: int, *, base: Path | None = None) -> dict:
    """Keyword arguments for `tracer.from_arrays` (rows layout) giving layer `layer` of the
    checkpoint at `path` (a folder, or a model name) on `text`; a relative path is taken from
    `base` when given. Reads the embeddings' rows of the text and the blocks up to `layer`, one
    block at a time (each is let go once applied)."""
    folder = find_checkpoint(path, base)
    data = config_json(folder)
    if hybrid_layer.is_hybrid(data):   # linear attention beside softmax layers (CONTRACT §16)
        return hybrid_layer.layer_arrays(folder, data, text, layer, Path(os.fspath(path)).name or folder.name,
                                         f"the {data['model_type']} checkpoint {os.fspath(path)!r} on the text {text!r}")
    if deepseek_v4_layer.is_v4(data):   # its streams, entries and grouped W_O (models/deepseek_v4_layer.py)
        return deepseek_v4_layer.layer_arrays(folder, data, text, layer, Path(os.fspath(path)).name or folder.name,
                                              f"the deepseek_v4 checkpoint {os.fspath(path)!r} on the text {text!r}")
    tensors = Tensors(folder)
    if traced.handles(data):   # the dense families of 2026: their own forward (models/dense2026)
        return _dense2026(folder, data, tensors, text, layer, Path(os.fspath(path)).name or folder.name)
    cfg = config_of(folder, data, tensors.names)
    check_layer(cfg, layer)
    ids, pieces = encode(folder, text, cfg.positions)
    label = Path(os.fspath(path)).name or folder.name
    return traced_layer(tensors, cfg, ids, pieces, layer, label,
                        f"the {cfg.model_type} checkpoint {os.fspath(path)!r} on the text {text!r}")


def _dense2026(folder: Path, data: dict, tensors, text: str, layer, label: str) -> dict:
    """layer_arrays() for the dense families of 2026 (CONTRACT §17): models/dense2026/traced.py."""
    inner = text_config(data)
    ids, pieces = encode(folder, text, inner.get("max_position_embeddings", 1 << 20))
    return dense2026_layer(tensors, data, ids, pieces, layer, label,
                           f"the {inner['model_type']} checkpoint {os.fspath(folder)!r} on the text {text!r}")


def dense2026_layer(tensors, data: dict, ids: list[int], pieces: list[str], layer, label: str, what: str) -> dict:
    """The arrays of layer `layer` of a dense 2026 family's model on the tokens `ids` (a folder's
    tensors or a state dict in memory); `what` says where it came from."""
    inner = text_config(data)
    arrays, shape = traced.arrays(tensors, data, ids, layer)
    latent, d = arrays.get("mla"), inner["hidden_size"]
    heads = f"{len(arrays['q'])} heads of {arrays['q'][0].shape[1]}" if latent is None else \
        f"{len(latent['q'])} heads, latent attention (rank {latent['down'].shape[1]}, rotary {latent['rope_k'].shape[1]})"
    stream = traced.STREAM.get(inner["model_type"], "x is the residual stream entering the layer")
    return dict(**arrays, tokens=pieces, name=f"{label}_layer{layer}",
                title=f"{label}, layer {layer} ({shape}): {len(ids)} tokens, d_model {d}, {heads}",
                description=f"Layer {layer} of {inner['num_hidden_layers']} of {what}. {stream}, computed by running "
                            f"the earlier blocks{_features(arrays, shape)}")


def dense2026_described(data: dict, path: str | None, text: str, layer: int, heads=None) -> dict:
    """origin()'s dict for a dense 2026 family (each layer's kind from its config)."""
    kinds = traced.kinds(data)
    return {"path": path, "text": text, "layer": layer, "layers": len(kinds),
            "heads": None if heads is None else list(heads), "kind": kinds[layer], "kinds": kinds}


def check_layer(cfg: Config, layer) -> None:
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < cfg.layers:
        raise ScenarioError("model.layer", f"expected a layer from 0 to {cfg.layers - 1} (the model has "
                            f"{cfg.layers}), got {kind(layer)}")


def traced_layer(tensors, cfg: Config, ids: list[int], pieces: list[str], layer: int, label: str, what: str) -> dict:
    """The arrays of layer `layer` on the tokens `ids` from a source of tensors (a folder's
    `Tensors`, or a model's state dict in memory): every tensor checked, then the stream entering
    the layer computed and the layer's weights read. `what` says where it came from."""
    check_all(tensors, cfg, layer)
    if cfg.family.indexer:   # DeepSeek Sparse Attention: the earlier blocks with their indexers (dsa_layer.py)
        x, sparse = dsa_layer.stream(tensors, cfg, ids, layer)
    else:
        x, sparse = _stream(tensors, cfg, ids, layer), None
    arrays = deepseek.layer_arrays(tensors, cfg, layer) if cfg.family.latent else \
        mechanisms(block(tensors, cfg, layer, mlp=False), cfg, layer)
    if sparse is not None:
        arrays["sparse"] = sparse
    grouped = f", {cfg.groups} key/value groups" if cfg.groups < cfg.heads else ""
    shape = cfg.kinds[layer].label(cfg.family.position)
    heads = f"{cfg.heads} heads of {cfg.head_dim}{grouped}" if not cfg.family.latent else \
        f"{cfg.heads} heads, latent attention (rank {cfg.mla['kv_rank']}, rotary {cfg.mla['rope']})"
    return dict(
        x=x, tokens=pieces, **arrays,
        name=f"{label}_layer{layer}",
        title=f"{label}, layer {layer}{f' ({shape})' if shape else ''}: {len(ids)} tokens, d_model {cfg.d_model}, {heads}",
        description=f"Layer {layer} of {cfg.layers} of {what}. x is the residual stream entering the layer, "
                    f"computed by running the earlier blocks{_features(arrays, shape)}")


def _features(arrays: dict, shape: str) -> str:
    """What sets this layer apart, in the words of its steps, for the scenario's description: its
    kind, its norm and scale, then each mechanism's own words."""
    said = [f"; this layer is {shape}"] if shape else [""]
    if arrays.get("norm_in") is not None:
        said.append("norm_in is its own pre-attention norm")
    if arrays.get("defaults", {}).get("scale") == "none":
        said.append("its scores are not divided (scale 1): the norms of q and k keep them in bounds")
    elif "defaults" in arrays:
        said.append(f"its scores are divided by {arrays['defaults']['scale']:g} rather than √d_k")
    said += [words for words in (m.said(arrays) for m in MECHANISMS.values()) if words]
    return "; ".join(said) + "."


def mechanisms(blk, cfg, layer: int) -> dict:
    """The layer's weights as `from_arrays` keywords: the projections, the norm before them, the
    window and the scores' scale, then each mechanism its family has (its module's `checkpoint`:
    QK-norm, rotary positions, soft-capping, ALiBi, sinks, the output's norm)."""
    kind_ = cfg.kinds[layer]

    def split(w: np.ndarray | None, count: int) -> list | None:
        """d × (count·head_dim) → count matrices d × head_dim (a bias: count vectors)."""
        if w is None:
            return None
        if w.ndim == 1:
            return list(w.reshape(count, -1))
        return list(np.ascontiguousarray(w.reshape(w.shape[0], count, -1).transpose(1, 0, 2)))
    h, g = cfg.heads, cfg.groups
    out = dict(q=split(blk.q, h), k=split(blk.k, g), v=split(blk.v, g), o=blk.o, bq=split(blk.bq, h),
               bk=split(blk.bk, g), bv=split(blk.bv, g), bo=blk.bo, norm_in=blk.norm_in, residual=dict(norm="none"),
               layout="rows", mask="causal" if kind_.window is None else f"sliding:{kind_.window}")
    for m in MECHANISMS.values():
        out.update(m.checkpoint(blk, cfg, layer))
    if cfg.scale is not None:
        out["defaults"] = {"scale": cfg.scale}
    always = ("bq", "bk", "bv", "bo", "rope", "norm_in")
    return {key: value for key, value in out.items() if value is not None or key in always}


def _stream(tensors: Tensors, cfg: Config, ids: list[int], layer: int) -> np.ndarray:
    """The residual stream entering `layer`: the embeddings through blocks 0 … layer − 1, its
    working memory checked first and each block's output checked finite (quietly: the error, not
    NumPy's warnings, says where the numbers left float64's range)."""
    n = len(ids)
    need = 8 * (3 * cfg.heads * n * n + n * (4 * cfg.d_model + 3 * cfg.inner))   # scores, weights, mask; MLP
    if layer and not memory.fits(need):
        blocks = "block 0" if layer == 1 else f"blocks 0 to {layer - 1}"
        raise ScenarioError("model.text", f"gives {n} tokens; running {blocks} on them {memory.shortfall(need)}")
    x = norm(embed(tensors, cfg, ids), embed_norm(tensors, cfg))
    with tensors.reusing():  # one block read at a time into the same buffers, let go once applied
        for i in range(layer):
            with np.errstate(all="ignore"):
                x = run_block(x, block(tensors, cfg, i), cfg, i)
            if not np.isfinite(x).all():
                raise ScenarioError(f"block {i}", "leaves float64's range (the residual stream after it holds inf "
                                    "or NaN); expected weights whose outputs stay finite", str(tensors.folder))
    return x


def keep_heads(arrays: dict, heads) -> dict:
    """The arrays with only the query heads `heads`; their key/value groups follow them (shared
    when each kept group keeps equally many heads, else one copy per head)."""
    if arrays.get("compressed") is not None:
        raise ScenarioError("model.heads", "expected no heads list for a deepseek_v4 layer: its heads share one "
                            "key/value head and a grouped W_O, traced together")
    latent = arrays.get("mla")
    total, groups = (len(latent["q"]), len(latent["q"])) if latent else (len(arrays["q"]), len(arrays["k"]))
    if not isinstance(heads, (list, tuple)) or not heads or any(
            isinstance(h, bool) or not isinstance(h, int) or not 0 <= h < total for h in heads) \
            or len(set(heads)) != len(heads):
        raise ScenarioError("model.heads", f"expected a list of different heads from 0 to {total - 1}, "
                            f"got {kind(heads)}")
    if arrays.get("qk_norm_scope") == "all":
        raise ScenarioError("model.heads", "expected no heads list for this model: its QK-norm takes the root "
                            "mean square over every head together, so one head cannot be traced alone")
    if latent:   # every head has its own up-projections: keep theirs, and their rows of W_O
        width = latent["up_v"][0].shape[1]
        rows = [r for h in heads for r in range(h * width, (h + 1) * width)]
        mla = dict(latent, **{key: [latent[key][h] for h in heads] for key in ("q", "rope_q", "up_k", "up_v")})
        return dict(arrays, mla=mla, o=arrays["o"][rows], title=arrays["title"] + f" (heads {', '.join(map(str, heads))})")
    share = total // groups
    group = [h // share for h in heads]
    kept = sorted(set(group))
    # the tracer gives kept head i the group i // (H'/G'): right when the heads come in group
    # order and every kept group keeps as many heads; otherwise each head gets its own copy
    pick = kept if group == sorted(group) and len({group.count(g) for g in kept}) == 1 else group
    width = arrays["v"][0].shape[1]   # W_O's rows: d_v a head (a linear layer's d_v is not its d_k)
    rows = [r for h in heads for r in range(h * width, (h + 1) * width)]
    out = dict(arrays, q=[arrays["q"][h] for h in heads], k=[arrays["k"][g] for g in pick],
               v=[arrays["v"][g] for g in pick], o=arrays["o"][rows])
    per = {"bq": "head", "bk": "group", "bv": "group"}   # and each mechanism's own (QK-norm's gains, slopes, sinks)
    per.update({key: scope for m in MECHANISMS.values() for key, scope in m.per_head.items()})
    for key, scope in per.items():
        if arrays.get(key) is not None:
            chosen = [arrays[key][i] for i in (heads if scope == "head" else pick)]
            out[key] = np.array(chosen) if isinstance(arrays[key], np.ndarray) else chosen
    if arrays.get("linear") is not None:   # a hybrid's linear layer: its per-head α, β, kernels and gates
        out["linear"] = linear_heads(arrays["linear"], heads)
    out["title"] += f" (heads {', '.join(map(str, heads))})"
    return out


def linear_heads(linear: dict, heads: list[int]) -> dict:
    """[linear]'s arrays of a checkpoint's layer for the kept heads only (its q and k are per head)."""
    pick = lambda a: None if a is None else np.asarray(a)[heads]   # noqa: E731
    out = dict(linear, decay=pick(linear["decay"]), beta=pick(linear.get("beta")))
    if linear.get("conv") is not None:
        out["conv"] = {key: pick(a) for key, a in linear["conv"].items()}
    if linear.get("norm") is not None:
        if linear["norm"].get("scope") == "all" and sorted(heads) != list(range(len(linear["decay"]))):
            raise ScenarioError("model.heads", f"expected every head of this layer (0 to {len(linear['decay']) - 1}): "
                                "its norm is one over all heads' outputs together (MiniMax's lightning layers)")
        norm = linear["norm"]
        out["norm"] = dict(norm, w_z=pick(norm["w_z"]), **({"gain": pick(norm["gain"])} if norm.get("scope") == "all" else {}))
    return {key: value for key, value in out.items() if value is not None}


def section_arrays(data: dict, source: str) -> dict:
    """The arrays of a scenario file with a [model] section (path, text, layer, optional heads);
    a relative path is relative to the file's folder. Name, title, description and arithmetic may
    be set beside it; inputs and weights come from the checkpoint only."""
    unknown(data, TOP_KEYS)
    section = data["model"]
    if not isinstance(section, dict):
        raise ScenarioError("model", f"expected a table with path, text and layer, got {kind(section)}")
    unknown(section, SECTION_KEYS, "model.")
    for key in ("path", "text", "layer"):
        if key not in section:
            raise ScenarioError(f"model.{key}", "missing; expected path, text and layer in [model]")
    arrays = layer_arrays(section["path"], section["text"], section["layer"], base=Path(source).parent)
    if "heads" in section:
        arrays = keep_heads(arrays, section["heads"])
    arrays["name"] = Path(source).stem
    arrays.update({k: data[k] for k in ("name", "title", "description", "arithmetic") if k in data})
    return arrays


def origin(path, text: str, layer: int, heads=None, base: Path | None = None) -> dict:
    """Where a model scenario came from, enough to build its other layers (the heads overview
    switches between them): the checkpoint's folder, the text, the layer and how many there are,
    and each layer's kind in words (sliding or global, its positions)."""
    folder = find_checkpoint(path, base)
    data = config_json(folder)
    if traced.handles(data):   # the dense families of 2026
        return dense2026_described(data, str(folder), text, layer, heads)
    if deepseek_v4_layer.is_v4(data):
        return deepseek_v4_layer.described(data, str(folder), text, layer, heads)
    if hybrid_layer.is_hybrid(data):
        return hybrid_layer.described(hybrid_layer.hybrid_of(data), str(folder), text, layer, heads)
    return described(read_config(folder), str(folder), text, layer, heads)


def described(cfg: Config, path: str | None, text: str, layer: int, heads=None) -> dict:
    """origin()'s dict for a checkpoint's Config; `path` None for a model in memory."""
    kinds = [k.label(cfg.family.position) for k in cfg.kinds]
    return {"path": path, "text": text, "layer": layer, "layers": cfg.layers,
            "heads": None if heads is None else list(heads), "kind": kinds[layer], "kinds": kinds}
