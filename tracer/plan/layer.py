"""The plan of a run: which steps it records, in computation order, with their formulas, inputs,
axes and shapes, all derived from the kinds' declarations before any number is computed."""
from __future__ import annotations

from ..ids import step_id
from ..mechanisms.compressed.steps import axes as compressed_axes
from ..mechanisms.kv_sharing.steps import heading   # a shared key's title names its source layer
from ..steps import KINDS, Context, Dims, Step



def context(dims: Dims, arithmetic, columns: bool, mask) -> Context:
    ctx = Context(dims, arithmetic, columns, mask)
    present = frozenset(name for name, kind in KINDS.items() if kind.present(ctx))
    return Context(dims, arithmetic, columns, mask, present)


def latent_axes(dims: Dims) -> dict:
    """The axes of multi-head latent attention's steps (0 without it)."""
    rank, rope, nope, q_rank, *_ = dims.latent or (0, 0, 0, 0)
    return dict(latent=rank, rope=rope, nope=nope, q_latent=q_rank)


def index_axes(dims: Dims) -> dict:
    """The axes of the lightning indexer's steps (0 without it)."""
    heads, d_index = (dims.of("indexer") or (0, 0))[:2]   # mechanisms/indexer/compute.Shape
    return dict(index_feature=heads * d_index, d_index=d_index, index_head=heads)


def layer_plan(dims: Dims, arithmetic, layout: str, mask) -> list[Step]:
    """The steps a run of the whole layer records: the input kinds, every head's kinds (a block loop
    under the online algorithm), then the layer's kinds. (A [decode] run: decode.py.)"""
    ctx = context(dims, arithmetic, layout == "columns", mask)
    size = dict(token=dims.n, query=dims.n, key=dims.keys, context=dims.keys, d_model=dims.d_model, d_k=dims.d_k,
                d_v=dims.d_v, d_out=dims.d_out, one=1, rank=dims.rank, d_context=dims.d_context or 0,
                pair=dims.pairs, **latent_axes(dims), **index_axes(dims), **{"token·d_k": dims.n * dims.d_k})
    size.update(compressed_axes(dims))   # DeepSeek V4's entries and streams (its indexer's axes too)
    steps = []

    def add(kind, head, group=None, block=None, first=0):
        axes = kind.axes(ctx) if callable(kind.axes) else kind.axes
        shape = [size[axes[0]], kind.width(dims) if kind.width else size[axes[1]]]
        starts = (0, first if axes[1] == "key" else 0)
        if block is not None and axes[1] == "key":   # a key block: its own keys only
            shape[1] = min(arithmetic.block, dims.keys - first)
        if ctx.columns:
            axes, shape, starts = axes[::-1], shape[::-1], starts[::-1]
        sid = step_id(kind.word, head, group=group, block=block)
        reader = head if group is None else group * (dims.heads // dims.kv_heads)   # a head that reads it
        inputs = kind.inputs(ctx, reader) if block is None else kind.inputs(ctx, reader, block)
        steps.append(Step(sid, kind.word, head, kind.formula(ctx), tuple(inputs), tuple(axes), tuple(shape), group,
                          key="" if kind.word == kind.name else kind.name, starts=tuple(starts), about=kind.why_in(ctx),
                          heading=heading(ctx, kind)))

    chosen = [KINDS[name] for name in KINDS if name in ctx.present]
    for kind in chosen:
        if kind.scope == "input":
            add(kind, None)
    per = dims.heads // dims.kv_heads
    for h in range(dims.heads):
        if dims.grouped and h % per == 0:   # a group's keys and values, once, before its first head
            for kind in chosen:
                if kind.scope == "kv":
                    add(kind, None, h // per)
        looped = False
        for kind in chosen:
            if kind.scope == "head" or (kind.scope == "kv" and not dims.grouped):
                add(kind, h)
            elif kind.scope == "block" and not looped:   # every block kind, block after block
                looped = True
                for j, first in enumerate(range(0, dims.keys, arithmetic.block)):
                    for each in chosen:
                        if each.scope == "block":
                            add(each, h, block=j, first=first)
    for kind in chosen:
        if kind.scope == "layer":
            add(kind, None)
    return steps
