"""The whole model at a glance (CONTRACT §20): every layer of a checkpoint on a text, each computed
once while the checkpoint streams by block by block (peak memory about one block's), with each
layer's kind, heads and memory, and for each head its matrix, its role scores (roles.py, as
TransformerLens's head detector computes them) and its circuits' top singular values (circuits.py).

    view = tracer.model_view("induction", "my cat saw a red bird . my cat saw a red bird")
    view.best("induction"), view.json(), view.cache_bytes, view.save("model.svg")

Modules: walk.py streams the checkpoint; kinds.py says what each kind of layer shows; view.py holds
the result (JSON, text in report.py, HTML in html.py; the figure is tracer/figures/model.py).

Adding a kind of layer (a linear or hybrid layer, a chunked one, one that reads another layer's
KV cache, a compressed one): write a class beside Softmax in kinds.py (or in the family's own
module) and put it in `kinds.KINDS` before Softmax, the catch-all. It declares

    claims(cfg, layer) -> bool     (static) whether it describes this layer of this config
    __init__(cfg, layer)           then sets:
      label                        the kind in words: "chunked 8192", "linear (gated delta rule)",
                                   "KV shared from layer 3", "compressed 4"
      heads, kv_heads              query heads and key/value heads
      memory                       a kinds.Memory: numbers a token (0 when it reads another
                                   layer's cache), the window it keeps them for, a state in all
                                   (a linear layer's), and multi-head attention's numbers a token
      kv_cache                     what its per-token numbers are, in words ("KV cache", "latent")
    run(x, tensors) -> (x, Seen)   the block applied once to the residual stream x (n × d_model),
                                   reusing the family's forward, and what the view shows of it:
                                   Seen(matrices, qk, ov, signed), matrices heads × n × n (a linear
                                   layer's implicit matrix, signed=True for a diverging scale),
                                   qk and ov heads × TOP singular values or None

Nothing else changes: the role scores read the matrices as they read softmax weights, the cache
figures sum Memory.numbers, and the TUI, the HTML and the figure draw the tiles and the labels.
"""
from __future__ import annotations

from .view import LayerRow, ModelView, open_view

__all__ = ["LayerRow", "ModelView", "model_view", "open_view"]


def model_view(model, text: str | None = None, *, context: int | None = None) -> ModelView:
    """Every layer and head of `model` (a checkpoint folder, a model name, or a model built-in such
    as "induction", whose own text is the default) on `text`; `context`: the tokens the cache
    figures count (default: the text's). A notebook shows it as HTML (no script)."""
    view = open_view(model, text, context=context)
    for _ in view.compute():
        pass
    return view
