"""Real checkpoints (Hugging Face layout; the families of families.py) as scenarios: one layer of
the model on your text, its input computed by running the earlier blocks in float64 NumPy.

    scenario = tracer.from_model("gpt2", "The cat sat on the mat", layer=5)
"""
from __future__ import annotations

from pathlib import Path

from .families import FAMILIES
from .layer import keep_heads, layer_arrays, origin, section_arrays

__all__ = ["FAMILIES", "from_model", "keep_heads", "layer_arrays", "origin", "section_arrays"]


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
