"""DeepSeek V4's residual streams around the attention (mechanisms/hyper: the formulas): the N streams
entering (`streams`, (token·stream) × d_model: rows t·N … t·N + N − 1 are token t's), how the
hyper-connection gives the output back to them (`hc.post`, token × stream) and mixes them
(`hc.comb`, (token·stream) × stream), and the streams after the attention, computed from the
layer's `out`: X'_k = post_k·out + Σ_j comb_jk·X_j (`streams_after`, in place of a residual)."""
from __future__ import annotations

import numpy as np

from ...steps.base import Kind, register
from .before import section


def on(ctx) -> bool:
    shape = ctx.dims.of("compressed")
    return shape is not None and shape.streamed


def _stream_row(cell) -> tuple[int, int]:
    """(token, stream) of a row of a (token·stream) step."""
    return divmod(cell.i, section(cell)["streams"])


def _given(what: str):
    def explain(cell) -> str:
        t, k = _stream_row(cell)
        return f"= {cell.f(cell.value)}   ({what.format(t=cell.token(t), k=k, j=cell.j)})"
    return explain


register(Kind(
    "streams", "Residual streams", ("token_stream", "d_model"), "input",
    "DeepSeek V4 carries N residual streams a token instead of one; x, what the attention reads, is their mix "
    "(hc.pre). Rows t·N … t·N + N − 1 are token t's streams.",
    formula=lambda ctx: "X_1 … X_N of every token, entering the layer",
    explain=_given("stream {k} of token {t}, entering the layer"), sources=lambda cell: {},
    inputs=lambda ctx, h: [], present=on), after="x")

register(Kind(
    "hc.post", "Output into the streams", ("token", "stream"), "layer",
    "After the attention, each stream takes its own share of the output: post_k.",
    formula=lambda ctx: "post = 2·σ(s_post·(RMSNorm(X_1‖…‖X_N)·F_post) + b_post)",
    explain=lambda cell: (f"= {cell.f(cell.value)}   (how much of the output stream {cell.j} of token "
                          f"{cell.token(cell.i)} takes)"),
    sources=lambda cell: {}, inputs=lambda ctx, h: [], present=on), after="grouped_out")

register(Kind(
    "hc.comb", "Streams mixed", ("token_stream", "stream"), "layer",
    "The streams are also mixed with each other, by a matrix whose rows and columns sum to about 1 (Sinkhorn): "
    "row t·N + j, column k is how much of stream j goes into stream k.",
    formula=lambda ctx: "comb = Sinkhorn(softmax_rows(s_comb·C̃ + B) + ε)",
    explain=_given("how much of stream {k} of token {t} goes into its stream {j}"),
    sources=lambda cell: {}, inputs=lambda ctx, h: [], present=on), after="hc.post")


def _after(cell) -> tuple[int, int, np.ndarray, np.ndarray]:
    t, k = _stream_row(cell)
    n = section(cell)["streams"]
    return t, k, cell.rows("hc.comb")[t * n:(t + 1) * n, k], cell.rows("streams")[t * n:(t + 1) * n, cell.j]


def _after_explain(cell) -> str:
    t, k, comb, x = _after(cell)
    post, out = cell.rows("hc.post")[t, k], cell.rows("out")[t, cell.j]
    return (f"= post_{k}·out + Σ_j comb_j{k}·X_j = {cell.f(post)}×{cell.f(out)} + {cell.dot(comb, x)} = "
            f"{cell.f(cell.value)}   (stream {k} of token {cell.token(t)} after the attention)")


def _after_sources(cell) -> dict:
    t, k, comb, _ = _after(cell)
    rows = range(t * len(comb), (t + 1) * len(comb))
    return {"hc.post": [(t, k)], "out": [(t, cell.j)], "hc.comb": [(r, k) for r in rows],
            "streams": [(r, cell.j) for r in rows]}


register(Kind(
    "streams_after", "Streams after the attention", ("token_stream", "d_model"), "layer",
    "There is no one residual: each stream takes its share of the attention's output and a mix of the streams "
    "before it. The MLP then reads them the same way.",
    formula=lambda ctx: "X'_k = post_k·out + Σ_j comb_jk·X_j", explain=_after_explain, sources=_after_sources,
    inputs=lambda ctx, h: ["hc.post", "out", "hc.comb", "streams"], present=on,
    tip="the stream's share of the output, plus each earlier stream times its mixing weight"), after="hc.comb")


def after(c: dict, out: np.ndarray) -> np.ndarray:
    """streams_after as a step, (token·stream) × d_model, from the layer's output."""
    from ..hyper import connections
    n, streams = len(out), c["streams"]
    x = c["x_streams"].reshape(n, streams, -1)
    return connections.expand(x, out, c["post"], c["comb"]).reshape(n * streams, -1)
