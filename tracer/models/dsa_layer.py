"""A traced layer of a DeepSeek Sparse Attention checkpoint (DeepSeek V3.2, GLM-5's glm_moe_dsa): the
stream entering it and its lightning indexer's parts, from dsa_block (the earlier blocks run with
their own indexers, choices and experts, as transformers runs them), as from_arrays' `sparse`
keyword; the latent attention's weights are V3's (deepseek.layer_arrays)."""
from __future__ import annotations

import numpy as np

from .. import memory
from ..errors import ScenarioError
from . import dsa_block


def stream(tensors, cfg, ids: list[int], layer: int) -> tuple[np.ndarray, dict]:
    """(x entering `layer`, its `sparse` keyword): the indexer's queries, key and head weights as
    its layer computed them, or, for a layer that reuses the choice of the full layer before it,
    that choice."""
    c, n = cfg.parts["indexer"], len(ids)
    # as layer._stream counts a block's working memory, and the indexer's heads × n × n votes beside it;
    # only the earlier blocks' attention runs here (the traced layer's is the trace's own)
    votes = (3 * cfg.heads + c.index["heads"]) * n * n if layer else 0
    need = 8 * (votes + n * (4 * cfg.d_model + 3 * cfg.inner))
    if not memory.fits(need):
        raise ScenarioError("model.text", f"gives {n} tokens; running blocks 0 to {layer} on them "
                            f"{memory.shortfall(need)}")
    pre = "model." if "model.embed_tokens.weight" in tensors else ""
    x = tensors.rows(pre + "embed_tokens.weight", list(ids))
    chosen, full = None, 0
    for i in range(layer):
        p = dsa_block.layer(x, tensors, c, pre, i, chosen)
        chosen, full = p["idx.selected"], i if c.index["types"][i] == "full" else full
        x = x + p["out"]
        x = x + dsa_block.mlp(dsa_block.rms(x, tensors[f"{pre}layers.{i}.post_attention_layernorm.weight"], c.eps),
                              tensors, c, pre, i)
    index = c.index
    sparse = dict(topk=index["topk"])
    if index["types"][layer] == "full":
        given = dsa_block.traced_indexer(x, tensors, c, pre, layer)
        sparse.update(scale=index["dim"] ** -0.5, given={key: given[f"idx.{key}"] for key in "qkw"},
                      rope=dict(dims=c.mla["rope"], style=index["style"]))
    else:
        sparse["shared"] = dict(selected=chosen.astype(np.int8), layer=full)
    return x, sparse


def said(arrays: dict) -> str | None:
    """The indexer in words, for the layer's description."""
    sp = arrays.get("sparse")
    if sp is None:
        return None
    if "shared" in sp:
        return (f"it has no indexer of its own: it reuses layer {sp['shared']['layer']}'s choice of each query's "
                f"top {sp['topk']} keys")
    heads, d = sp["given"]["w"].shape[1], sp["given"]["k"].shape[1]
    return (f"its lightning indexer ({heads} index heads of {d}) keeps each query's top {sp['topk']} keys; the "
            "others weigh exactly 0 in every head")
