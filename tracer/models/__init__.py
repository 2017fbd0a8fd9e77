"""Real checkpoints (Hugging Face layout; the families of families.py) as scenarios: one layer of
the model on your text, its input computed by running the earlier blocks in float64 NumPy.

    scenario = tracer.from_model("gpt2", "The cat sat on the mat", layer=5)
    scenario = tracer.from_transformers(model, tokenizer, "The cat sat on the mat", layer=5)
"""
from __future__ import annotations

from pathlib import Path

from ..errors import ScenarioError
from . import hybrid_layer
from .blocks import prefix
from .config import parse
from .families import FAMILIES
from .dense2026 import traced
from .dense2026.settings import text_config
from .layer import (check_layer, dense2026_described, dense2026_layer, described, keep_heads, layer_arrays, origin,
                    section_arrays, traced_layer)
from .state import WHERE, StateTensors, backend, model_config, saved_state
from .tokens import encode_with

__all__ = ["FAMILIES", "from_model", "from_transformers", "keep_heads", "layer_arrays", "origin", "section_arrays"]


def from_model(path, text: str, layer: int, *, heads=None, base: Path | None = None):
    """A Scenario of layer `layer` of a checkpoint on `text` (see `layer_arrays`); `heads`, a list
    of query heads, keeps only those (numbered from 0 again; `out` is then their share)."""
    from ..scenario import from_arrays

    arrays = layer_arrays(path, text, layer, base=base)
    if heads is not None:
        arrays = keep_heads(arrays, heads)
    scenario = from_arrays(**arrays)
    scenario.model = origin(path, text, layer, heads, base)
    return scenario


def from_transformers(model, tokenizer, text: str, layer: int, *, heads=None):
    """`from_model` for a transformers model already in memory and its tokenizer: its config and
    state dict are read as a folder's config.json and safetensors would be (same families, same
    checks and refusals); nothing is written to disk."""
    from ..scenario import from_arrays

    data = model_config(model)
    tensors = StateTensors(saved_state(model))
    if traced.handles(data):   # the dense families of 2026: their own forward (dense2026/)
        return _dense2026(model, tokenizer, text, layer, heads, data, tensors)
    if hybrid_layer.is_hybrid(data):   # linear attention beside softmax layers (CONTRACT §16)
        return _hybrid_in_memory(model, data, tensors, tokenizer, text, layer, heads)
    try:
        cfg = parse(data, tensors.names)
    except ScenarioError as err:
        raise err.at(f"{WHERE} ({type(model).__name__})") from None
    check_layer(cfg, layer)
    inner = backend(tokenizer)
    ids, pieces = encode_with(inner, text, cfg.positions, WHERE, "tokenizer")
    _same_vocabulary(inner, tensors, cfg, data)
    name = str(getattr(model.config, "name_or_path", "") or cfg.model_type)
    label = name.rstrip("/").rsplit("/", 1)[-1] or cfg.model_type
    arrays = traced_layer(tensors, cfg, ids, pieces, layer, label,
                          f"the {cfg.model_type} model {name!r} (in memory) on the text {text!r}")
    if heads is not None:
        arrays = keep_heads(arrays, heads)
    scenario = from_arrays(**arrays)
    scenario.model = described(cfg, None, text, layer, heads)   # as from_model's, without a folder
    return scenario


def _dense2026(model, tokenizer, text: str, layer: int, heads, data: dict, tensors):
    """from_transformers() for the dense families of 2026 (models/dense2026/traced.py)."""
    inner = text_config(data)
    longest = inner.get("max_position_embeddings", 1 << 20)
    return _own_forward(model, tokenizer, text, heads, inner["model_type"], longest,
                        lambda ids, pieces, *named: dense2026_layer(tensors, data, ids, pieces, layer, *named),
                        lambda: dense2026_described(data, None, text, layer, heads))


def _hybrid_in_memory(model, data: dict, tensors, tokenizer, text: str, layer: int, heads):
    """from_transformers() of a hybrid family's model (hybrid_layer.py)."""
    cfg = hybrid_layer.hybrid_of(data)
    hybrid_layer.check(cfg, layer)
    return _own_forward(model, tokenizer, text, heads, cfg.model_type, 1 << 20,
                        lambda ids, pieces, *named: hybrid_layer.traced(tensors, cfg, ids, pieces, layer, *named),
                        lambda: hybrid_layer.described(cfg, None, text, layer, heads))


def _own_forward(model, tokenizer, text: str, heads, model_type: str, longest: int, traced, described):
    """from_transformers() for the families whose own forward builds the traced layer: the text
    encoded (at most `longest` tokens), traced(ids, pieces, label, description) → from_arrays
    keywords, a few heads kept where asked, described() → scenario.model."""
    from ..scenario import from_arrays
    ids, pieces = encode_with(backend(tokenizer), text, longest, WHERE, "tokenizer")
    name = str(getattr(model.config, "name_or_path", "") or model_type)
    label = name.rstrip("/").rsplit("/", 1)[-1] or model_type
    arrays = traced(ids, pieces, label, f"the {model_type} model {name!r} (in memory) on the text {text!r}")
    scenario = from_arrays(**(arrays if heads is None else keep_heads(arrays, heads)))
    scenario.model = described()
    return scenario


def _same_vocabulary(tokenizer, tensors, cfg, data: dict) -> None:
    """Another model's tokenizer is refused: one whose vocabulary is larger than the model's
    embedding table (a model's own may be smaller: tables are often padded), or one that lacks the
    model's own special tokens (config's bos_token_id and eos_token_id)."""
    rows = tensors.shape(prefix(tensors, cfg) + cfg.family.embed + ".weight")[0]
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    if size > rows:
        raise ScenarioError("tokenizer", f"has a vocabulary of {size} tokens; expected at most the model's "
                            f"{rows} (the tokenizer of this {cfg.model_type} model, not another's)")
    for key in ("bos_token_id", "eos_token_id"):
        ids = data.get(key)
        for i in ids if isinstance(ids, list) else [ids]:
            if isinstance(i, int) and not isinstance(i, bool) and tokenizer.id_to_token(i) is None:
                raise ScenarioError("tokenizer", f"has no token {i}, the model's {key}; expected the tokenizer of "
                                    f"this {cfg.model_type} model, not another's")
