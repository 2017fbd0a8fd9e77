"""The model view's object: the checkpoint and the text, one LayerRow per layer (filled as the
blocks stream by), and what the whole model keeps; as JSON (CONTRACT §20), as text, as HTML for a
notebook, as a figure."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from ..errors import ScenarioError
from . import roles, tiles
from .kinds import Memory


@dataclass
class LayerRow:
    """One layer as the view shows it: its kind's label, heads (query, key/value), memory, each
    head's tile (its matrix made small), role scores (role → one per head) and circuits."""
    layer: int
    kind: str
    heads: int
    kv_heads: int
    memory: Memory
    cache: str                       # what its per-token numbers are: "KV cache", "latent", …
    tiles: np.ndarray                # heads × ≤SIDE × ≤SIDE
    signed: bool
    scores: dict
    qk: np.ndarray | None
    ov: np.ndarray | None

    def head(self, h: int) -> dict:
        """Head h as the JSON lists it."""
        out = {"head": h, **{role: float(self.scores[role][h]) for role in roles.ROLES}}
        out["qk"] = [] if self.qk is None else [float(s) for s in self.qk[h]]
        out["ov"] = [] if self.ov is None else [float(s) for s in self.ov[h]]
        return out

    def json(self) -> dict:
        m = self.memory
        return {"layer": self.layer, "kind": self.kind, "heads": [self.head(h) for h in range(self.heads)],
                "cache_per_token": m.per_token, "state": m.state, "query_heads": self.heads,
                "kv_heads": self.kv_heads, "window": m.window, "mha_cache_per_token": m.mha_per_token}


@dataclass
class ModelView:
    """Every layer and head of a checkpoint on a text; `compute()` fills `layers` (see model_view)."""
    name: str
    model_type: str
    layer_count: int
    tokens: list[str]
    ids: list[int]
    context: int
    dtype: str
    itemsize: int
    layers: list[LayerRow]
    source: object = None            # (tensors, cfg) until computed

    def compute(self) -> Iterator[LayerRow]:
        """Streams the checkpoint, appending and yielding each layer's row as it is done."""
        from . import dense2026, deepseek_v4
        from ..models.hybrid_config import Hybrid
        from .walk import layers
        if self.source is None:
            return
        tensors, cfg = self.source
        found = roles.patterns(self.ids)
        walk = dense2026.layers if isinstance(cfg, dict) else layers   # a dict: a dense 2026 family's config.json
        walk = deepseek_v4.layers if self.model_type == "deepseek_v4" else walk   # tensors: its folder
        if isinstance(cfg, Hybrid):   # linear layers beside softmax ones (model_view/hybrid.py)
            from .hybrid import layers as walk
        for kind, seen in walk(tensors, cfg, self.ids):
            scores = roles.scores(seen.matrices[..., :len(self.ids)], found)   # the tokens' keys (V4: entries after)
            small = np.stack([tiles.shrink(a, signed=seen.signed) for a in seen.matrices]).astype(np.float32)
            row = LayerRow(len(self.layers), kind.label, kind.heads, kind.kv_heads, kind.memory, kind.kv_cache,
                           small, seen.signed, scores, seen.qk, seen.ov)
            self.layers.append(row)
            del seen   # only its tiles, scores and circuits stay: not the heads × n × n matrices
            yield row
        self.source = None

    @property
    def cache_bytes(self) -> int:
        """Bytes the whole model keeps after `context` tokens, in the checkpoint's dtype."""
        return self.itemsize * sum(r.memory.numbers(self.context) for r in self.layers)

    @property
    def mha_cache_bytes(self) -> int:
        """The same for multi-head attention in every layer (each head's key and value, every token)."""
        return self.itemsize * self.context * sum(r.memory.mha_per_token for r in self.layers)

    def best(self, role: str, count: int = 1) -> list[tuple[int, int, float]]:
        """The `count` heads with the highest `role` score: (layer, head, score), best first."""
        every = [(r.layer, h, float(r.scores[role][h])) for r in self.layers for h in range(r.heads)]
        return sorted(every, key=lambda t: (-t[2], t[0], t[1]))[:count]

    def json(self) -> dict:
        return {"layers": [r.json() for r in self.layers], "cache_bytes": self.cache_bytes,
                "mha_cache_bytes": self.mha_cache_bytes, "model": self.name, "model_type": self.model_type,
                "tokens": self.tokens, "context": self.context, "dtype": self.dtype}

    def report(self) -> str:
        from .report import report
        return report(self)

    def _repr_html_(self) -> str:
        from .html import view_html
        return view_html(self)

    def save(self, path, fmt: str | None = None):
        """Draws the view (one tile per layer and head) to `path`, SVG or PNG (matplotlib)."""
        from ..figures.model import write_model_figure
        return write_model_figure(self, path, fmt)

    def __repr__(self) -> str:
        return (f"<ModelView {self.name}: {self.model_type}, {len(self.layers)} of {self.layer_count} layers, "
                f"{len(self.tokens)} tokens, cache {self.cache_bytes:,} bytes at {self.context} tokens "
                f"(multi-head attention: {self.mha_cache_bytes:,})>")


def open_view(model, text=None, *, context: int | None = None, base=None) -> ModelView:
    """The view of `model` on `text` with its header read (config, tokens, dtype) and no layer
    computed yet: everything that can be refused is refused here, before any block runs."""
    import os
    from ..checks import kind as what
    from ..models.config import config_json, read_config
    from ..models import hybrid_layer
    from ..models.dense2026 import traced
    from ..models.hybrid_config import hybrid_of
    from ..models.dense2026.settings import text_config
    from . import dense2026
    from ..models.tokens import encode
    from ..models.weights import Tensors
    from .walk import check, itemsize, resolve
    folder, text, name = resolve(model, text, base)
    if text is None:
        raise ScenarioError("model.text", "missing; expected the text for the model to read")
    if context is not None and (isinstance(context, bool) or not isinstance(context, int) or context < 1):
        raise ScenarioError("context", f"expected a whole number of tokens ≥ 1, got {what(context)}")
    data = config_json(folder)
    if data.get("model_type") == "deepseek_v4":   # its own forward: streams, entries (model_view/deepseek_v4.py)
        return _deepseek_v4(folder, data, text, name, context)
    if traced.handles(data):   # the dense families of 2026: their own forward (model_view/dense2026.py)
        traced.supported(data)
        inner, tensors = text_config(data), Tensors(folder)
        ids, pieces = encode(folder, text, inner.get("max_position_embeddings", 1 << 20))
        dtype, size = dense2026.itemsize(tensors)
        return ModelView(name or os.fspath(folder), inner["model_type"], inner["num_hidden_layers"], pieces, ids,
                         context or len(ids), dtype, size, [], (tensors, data))
    if hybrid_layer.is_hybrid(data):   # linear layers beside softmax ones (model_view/hybrid.py)
        from . import hybrid
        cfg, tensors = hybrid_of(data), Tensors(folder)
        ids, pieces = encode(folder, text, 1 << 20)
        dtype, size = hybrid.itemsize(tensors)
        return ModelView(name or os.fspath(folder), cfg.model_type, cfg.layers, pieces, ids, context or len(ids),
                         dtype, size, [], (tensors, cfg))
    cfg = read_config(folder)
    ids, pieces = encode(folder, text, cfg.positions)
    tensors = Tensors(folder)
    check(tensors, cfg, len(ids))
    dtype, size = itemsize(tensors, cfg)
    return ModelView(name or os.fspath(folder), cfg.model_type, cfg.layers, pieces, ids,
                     context or len(ids), dtype, size, [], (tensors, cfg))


def _deepseek_v4(folder, data: dict, text: str, name: str, context: int | None) -> ModelView:
    """open_view() for DeepSeek V4: its config read and its tensors checked before any block runs."""
    from ..models.sparse_config import read_v4
    from ..models.tokens import encode
    from . import deepseek_v4
    c = read_v4(data)
    ids, pieces = encode(folder, text, data.get("max_position_embeddings", 1 << 20))
    deepseek_v4.check(folder, len(ids))
    dtype, size = deepseek_v4.itemsize(folder)
    return ModelView(name, "deepseek_v4", c.layers, pieces, ids, context or len(ids), dtype, size, [], (folder, c))
