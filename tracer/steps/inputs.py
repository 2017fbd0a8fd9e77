"""The input and the projections: x (and a cross-attention's context, and a real model's norm
before the layer), then each head's queries and each key/value head's keys and values (with the
low-rank value map's squeezed values when there is one), biases included."""
from __future__ import annotations

from ..ids import parse
from .base import Kind, register
from .cell import whole_row

PRODUCTS = "multiply each pair of numbers, then add the products"   # a projection's hint
_W = {"q": ("W_Q", "Q", "b_Q"), "k": ("W_K", "K", "b_K"), "v_down": ("W_V↓", "V↓", ""), "v": ("W_V", "V", "b_V")}


def _index(cell) -> int:
    """Which matrix of a per-head or per-group weight a cell's step used."""
    return cell.step.group if cell.step.group is not None else cell.step.head


def _weight(cell, kind: str):
    sc = cell.scenario
    return {"q": sc.w_q, "k": sc.w_k, "v_down": sc.w_v_down, "v": sc.w_v, "v_up": sc.w_v_up}[kind][_index(cell)]


def _bias(cell, kind: str):
    b = {"q": cell.scenario.b_q, "k": cell.scenario.b_k, "v": cell.scenario.b_v}.get(kind)
    return None if b is None else b[_index(cell)]


def _project_formula(kind: str):
    def formula(ctx) -> str:
        w, name, b = _W[kind]
        src = {"x": "X", "norm_in": "N", "context": "C", "c_kv": "C_KV", "kv_x": "X_kv"}[
            ctx.source() if kind == "q" else ctx.kv_source()]
        if kind == "v" and ctx.dims.latent:
            return "V = W_UV·C_KV   (rebuilt from the cached latent)" if ctx.columns else \
                "V = C_KV·W_UV   (rebuilt from the cached latent)"
        if kind == "v" and ctx.dims.rank:
            return "V = W_V↑·V↓" if ctx.columns else "V = V↓·W_V↑"
        if kind == "v" and ctx.dims.v_is_k:
            return "V = K   (the values are the keys: W_V = W_K)"
        plus = f" + {b}" if b and kind in ctx.dims.biases else ""
        return f"{name} = {w}·{src}{plus}" if ctx.columns else f"{name} = {src}·{w}{plus}"
    return formula


def _project_explain(kind: str):
    def explain(cell) -> str:
        step = cell.step
        if kind == "v" and cell.scenario.v_is_k:
            return (f"= {step.inputs[0]}[{cell.key_token(cell.i)}, {cell.j}] = {cell.f(cell.value)}   "
                    "(the values are the keys)")
        if kind == "v" and cell.scenario.rank is not None:
            return cell.project(cell.rows(cell.sid("v_down")), _weight(cell, "v_up"), "W_V↑",
                                f"v↓({cell.token(cell.at)})")
        src = step.inputs[0]
        who = cell.key_token(cell.at) if src == "context" or kind != "q" else cell.token(cell.at)
        latent = parse(src).kind in ("c_kv", "ckv_cache")   # rebuilt from the (cached) latent
        w_name = "W_UV" if latent else _W[kind][0]
        who = f"c_kv({who})" if latent else f"kv_x({who})" if src == "kv_x" else who
        return cell.project(cell.rows(src), _weight(cell, kind), w_name, who, _bias(cell, kind), _row(cell))
    return explain


def _row(cell) -> int:
    """The row of the step's input a cell reads: a decoded token's row 0 reads x's row t."""
    return cell.at if cell.step.inputs[0] in ("x", "norm_in", "context", "c_kv", "kv_x") else cell.i


def _project_sources(cell) -> dict:
    src = cell.step.inputs[0]
    if cell.step.kind == "v" and cell.scenario.v_is_k:
        return {src: [(cell.i, cell.j)]}
    return whole_row(src, _row(cell), cell.rows(src).shape[1])


def _kv_axes(width: str):
    """Keys and values by context token, by key where there are more keys than tokens (DeepSeek V4's
    entries after them), else by token."""
    return lambda ctx: ("context", width) if ctx.cross else ("key", width) if ctx.dims.keys != ctx.dims.n \
        else ("token", width)


def _projection(kind: str, title: str, axes, scope: str, why: str, **extra) -> Kind:
    source = (lambda ctx, h: [ctx.source()]) if kind == "q" else (lambda ctx, h: [ctx.kv_source()])
    return register(Kind(kind, title, axes, scope, why, _project_formula(kind), _project_explain(kind),
                         _project_sources, inputs=extra.pop("inputs", source), tip=PRODUCTS, **extra))


register(Kind(
    "x", "Input", ("token", "d_model"), "input",
    "Each token enters as a vector of features (its embedding). Everything below is computed "
    "from these numbers and the weight matrices.",
    formula=lambda ctx: "X: one column per token" if ctx.columns else "X: one row per token",
    explain=lambda cell: f"= {cell.f(cell.value)}   (input: token {cell.token(cell.i)}, {cell.feature(cell.j)})",
    sources=lambda cell: {}, inputs=lambda ctx, h: []))

register(Kind(
    "context", "Context", ("context", "d_context"), "input",
    "Cross-attention: the queries come from one sequence (x) and the keys and values from another, "
    "the context (say, the sentence being translated). Each token of x looks up the context.",
    formula=lambda ctx: "C: one column per context token" if ctx.columns else "C: one row per context token",
    explain=lambda cell: f"= {cell.f(cell.value)}   (context token {cell.key_token(cell.i)}, feature {cell.j})",
    sources=lambda cell: {}, inputs=lambda ctx, h: [], present=lambda ctx: ctx.cross))


def _norm_in_explain(cell) -> str:
    sc, r = cell.scenario, cell.rows("x")[cell.i]
    spec, f = sc.norm_in, cell.f
    g, b = spec["gain"][0, cell.j], spec["bias"][0, cell.j]
    if spec["kind"] == "rms":
        ms = float((r * r).mean())
        core = f"{f(r[cell.j])} ÷ √({ms:.4g} + {spec['eps']:g})"
    else:
        core = f"({f(r[cell.j])} − {r.mean():.4g}) ÷ √({r.var():.4g} + {spec['eps']:g})"
    return (f"= {core}·{f(g)} + {f(b)} = {cell.value:.4g}   (this token's row, the layer's learned gain "
            "and bias)").replace("-", "−")


register(Kind(
    "norm_in", "Norm before attention", ("token", "d_model"), "input",
    "A real model normalises each token's vector before attention (LayerNorm in GPT-2, RMSNorm in "
    "Llama), then scales and shifts it by learned numbers; the projections read this, not x.",
    formula=lambda ctx: ("LayerNorm(x)·g + b, per token" if ctx.dims.norm_kind == "layer"
                         else "x ÷ RMS(x)·g, per token"),
    explain=_norm_in_explain, sources=lambda cell: whole_row("x", cell.i, cell.rows("x").shape[1]),
    inputs=lambda ctx, h: ["x"], present=lambda ctx: ctx.dims.norm_in))

_projection("q", "Queries", ("token", "d_k"), "head",
            "A query is what a token is looking for. It is the token's features passed through W_Q, "
            "a matrix the model learns.", chain="query",
            present=lambda ctx: not (ctx.dims.latent or ctx.dims.of("compressed")))
_projection("k", "Keys", _kv_axes("d_k"), "kv",
            "A key is what a token offers to be found by. Queries are compared with keys; a separate "
            "matrix W_K lets 'what I look for' differ from 'what I am'.", chain="key",
            present=lambda ctx: not (ctx.dims.latent or ctx.dims.of("compressed")))
_projection("v_down", "Values, down-projected", _kv_axes("rank"), "kv",
            "A low-rank value map first squeezes each token into a few numbers (W_V↓), then spreads "
            "them back out (W_V↑): far fewer parameters than a full W_V.",
            present=lambda ctx: ctx.dims.rank > 0)
_projection("v", "Values", _kv_axes("d_v"), "kv",
            "A value is what a token hands over once it is attended to. The output mixes values, not "
            "the raw inputs.", chain="value",
            inputs=lambda ctx, h: ([ctx.sid("v_down", h)] if ctx.dims.rank else
                                   [ctx.sid("k", h)] if ctx.dims.v_is_k else [ctx.kv_source()]))
