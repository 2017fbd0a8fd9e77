"""The lightning indexer of DeepSeek Sparse Attention (DeepSeek V3.2, GLM-5, DeepSeek V4's sparse
layers): a few small, ReLU'd heads score every earlier key, and each query keeps its top k.
`scores` holds the formula, `topk` the choice and why a key was kept, `rotary` the turns; `reader`
the scenario file's [sparse] section, `compute` a trace's numbers, `steps` its steps (idx.*)."""
from __future__ import annotations

from ..declaration import Mechanism
from . import steps  # noqa: F401  (registers its kinds)
from .compute import dropped_cells, kept_words, shape
from .reader import KEYS, WEIGHTS, read


def _arrays(sc) -> dict:
    sp = sc.sparse
    return {f"weights.{key}": sp[name] for key, name in zip(WEIGHTS, ("w_iq", "w_ik", "w_iw")) if sp[name] is not None}


def _given(trace) -> list:
    """W_IQ, W_IK, W_w as the layout writes them, for the exports."""
    sp, columns = trace.scenario.sparse, trace.columns
    axes = {"w_iq": "index_feature", "w_ik": "d_index", "w_iw": "index_head"}
    return [(f"weights.{key}", ("d_model", axes[name])[::-1] if columns else ("d_model", axes[name]),
             sp[name].T if columns else sp[name])
            for key, name in zip(WEIGHTS, axes) if sp[name] is not None]


def _describe(sc) -> dict:
    sp = sc.sparse
    if sp["shared"] is not None:
        return {"topk": sp["topk"], "shared_from": sp["shared"]["layer"]}
    return {"topk": sp["topk"], "index_heads": sp["heads"], "d_index": sp["d_index"], "scale": sp["scale"]}


def _config(data: dict, family):
    """A DeepSeek Sparse Attention checkpoint's sizes (models/sparse_config.read_dsa), or None."""
    if not family.indexer:
        return None
    from ...models.sparse_config import read_dsa
    return read_dsa(data)


def _said(arrays: dict):
    from ...models.dsa_layer import said
    return said(arrays)


# the lightning indexer ([sparse] topk with [weights] index_q, index_k, index_w): its steps idx.* before
# the heads, its choice hiding the other keys from every head (the trace's allowed matrix, which the
# stage and the fused kernels apply as a mask matrix: masks.kernel_mask)
DECLARATION = Mechanism(
    "indexer", "a lightning indexer", field="sparse", label="[sparse]", keys=("sparse",), weight_keys=WEIGHTS,
    arguments={"sparse": "sparse", **{key: f"weights.{key}" for key in WEIGHTS}}, read=read, dims=lambda sc: shape(sc.sparse),
    arrays=_arrays, given=_given, symbols={"weights.index_q": "W_IQ", "weights.index_k": "W_IK", "weights.index_w": "W_w"},
    describe=_describe, describe_key="sparse",
    given_words=lambda sc: f"the indexer keeps each query's {sc.sparse['topk']} best keys",
    online=False, decode=False, config=_config, said=_said, dropped=dropped_cells, chosen=kept_words,
    texts={"masked.formula": lambda ctx: ("S, with −∞ where the key comes after the query or the indexer did not "
                                          "select it (idx.selected)"),   # its choice on top of the causal mask
           "masked.explain": steps.dropped,   # a key the causal mask lets the query see but the indexer dropped
           "weights.beside": lambda cell: steps.dense(cell) or None})   # what dense attention would give

__all__ = ["DECLARATION", "KEYS"]
