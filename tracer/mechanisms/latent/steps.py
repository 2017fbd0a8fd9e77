"""Multi-head latent attention (DeepSeek-V2/V3, Kimi K2): every token is squeezed into one small
latent c_kv, from which each head rebuilds its keys (k_nope) and values; positions travel apart, in
one rotary key k_pe shared by all heads. A decoder caches only c_kv and k_pe. The scores are
q_nope·k_noptᵀ + q_pe·k_peᵀ; folding W_UK into the query (q_latent) gives the same scores straight
from the cache (absorbed), which is how the cache is read without rebuilding a single key. With a
query temperature (Mistral 4) the warmed q_temp = [q_nope | q_pe]·τ(p) stands in for both parts
(steps/scores.query_parts)."""
from __future__ import annotations

import numpy as np

from ...ids import parse
from ...steps.base import Kind, register
from ...steps.cell import whole_row
from ...steps.inputs import PRODUCTS
from ...steps.scores import query_parts, standard
from ..rotary import frequencies


_NORMED = ("multiply each pair of numbers and add the products; with a gain, divide by the row's root mean square "
           "and multiply by the gain")
_TURNED = "project the row, then turn its pair: first·cos − second·sin, or first·sin + second·cos"


def _on(ctx) -> bool:
    return bool(ctx.dims.latent)


def q_source(ctx) -> str:
    """What the heads' queries are projected from: the compressed c_q, or the layer's input."""
    return "c_q" if ctx.dims.latent[3] else ctx.source()


def _m(cell) -> dict:
    return cell.scenario.mla


def _raw(cell, src: str, w: np.ndarray) -> np.ndarray:
    """A row of src·w (float64) for the cell's token: what is normed or rotated next."""
    return cell.rows(src)[cell.at].astype(np.float64) @ w


def cache_words(sc) -> str:
    """This layer's KV cache per token beside the other kinds of attention's (DeepSeek-V2's table)."""
    m, sizes = sc.mla, sc.cache_per_token()
    from .compute import gqa_groups
    g = gqa_groups(sc.heads)
    return (f"a token adds {m['rank']} + {m['rope']} = {sizes['MLA']} numbers to the cache; multi-head attention "
            f"with {sc.heads} heads of {sc.d_v} would add 2·{sc.heads}·{sc.d_v} = {sizes['MHA']}, grouped-query "
            f"with {g} group{'s' if g != 1 else ''} {sizes['GQA']}, multi-query {sizes['MQA']}")


# ------------------------------------------------------------------ c_q and c_kv: the latents

def _latent_formula(name: str, w: str, norm: int):
    """`norm`: where Dims.mla says whether this latent is RMS-normed (4: c_kv, 5: c_q)."""
    def formula(ctx) -> str:
        src = {"x": "X", "norm_in": "N"}[ctx.source()]
        prod = f"{w}·{src}" if ctx.columns else f"{src}·{w}"
        normed = ctx.dims.latent[norm]
        body = f"{name} = RMS-normed({prod})·g" if normed else f"{name} = {prod}"
        return body + ("   (cached, with k_pe)" if name == "C_KV" else "")
    return formula


def _latent_explain(which: str):
    def explain(cell) -> str:
        m, f, j = _m(cell), cell.f, cell.j
        w, gain = (m["w_dq"], m["q_norm"]) if which == "c_q" else (m["w_dkv"], m["kv_norm"])
        src = cell.step.inputs[0]
        w_name = "W_DQ" if which == "c_q" else "W_DKV"
        who = cell.token(cell.at)
        cached = f"   ({cache_words(cell.scenario)})" if which == "c_kv" else ""
        if gain is None:
            return cell.project(cell.rows(src), w, w_name, who, at=cell.at) + cached
        raw = _raw(cell, src, w)
        ms = float((raw * raw).mean())
        plus = f" + {m['eps']:g}" if m["eps"] else ""
        dot = cell.dot(cell.rows(src)[cell.at], w[:, j])
        body = (f"= ({dot}) ÷ √({ms:.4g}{plus}) × {f(gain[j])} = {f(raw[j])} ÷ {np.sqrt(ms + m['eps']):.4g} × "
                f"{f(gain[j])} = {f(cell.value)}").replace("-", "−")
        return (f"{body}   ({who}'s row through {w_name}, divided by its root mean square, times the gain"
                f"{'; ' + cache_words(cell.scenario) if which == 'c_kv' else ''})")
    return explain


def _row_sources(cell) -> dict:
    src = cell.step.inputs[0]
    return whole_row(src, cell.at, cell.rows(src).shape[1])


register(Kind(
    "c_q", "Queries' latent", ("token", "q_latent"), "input",
    "The larger models squeeze each token into a small vector before making its queries too (a "
    "low-rank W_Q = W_DQ·W_UQ): fewer weights to learn and to read. Only the keys' latent is cached.",
    formula=_latent_formula("C_Q", "W_DQ", 5), explain=_latent_explain("c_q"), sources=_row_sources,
    inputs=lambda ctx, h: [ctx.source()], present=lambda ctx: _on(ctx) and ctx.dims.latent[3] > 0, tip=_NORMED),
    after="norm_in")
register(Kind(
    "c_kv", "Latent (cached)", ("token", "latent"), "input",
    "Multi-head latent attention keeps one small vector per token, the latent, instead of every head's "
    "key and value: each head rebuilds its keys and values from it with its own up-projections. The "
    "latent and the rotary key k_pe are all a decoder caches, a few times less than multi-head "
    "attention's keys and values.",
    formula=_latent_formula("C_KV", "W_DKV", 4), explain=_latent_explain("c_kv"), sources=_row_sources,
    inputs=lambda ctx, h: [ctx.source()], present=_on, tip=_NORMED), after="c_q")


# ------------------------------------------------------------------ the rotary parts

def _turned(cell, raw: np.ndarray, name: str) -> str:
    """A rotated cell from its unrotated row `raw` (src·W): the pair it belongs to, turned."""
    spec, j, f = cell.scenario.rope, cell.j, cell.f
    d = raw.shape[0]
    i = frequencies.pair_of(j, d, spec["style"])
    first, second = frequencies.pairs(d, spec["style"])
    p = frequencies.positions(spec, cell.at + 1)[-1]
    theta = float(cell.rows("freqs")[i, 0])
    a = frequencies.attention_factor(spec)
    c, s = float(np.cos(p * theta)) * a, float(np.sin(p * theta)) * a
    x, y = raw[first[i]], raw[second[i]]
    angle = f"{p:g}θ{i}"
    if j == first[i]:
        body = f"{name}[{first[i]}]·cos {angle} − {name}[{second[i]}]·sin {angle} = {f(x)}·{c:.4g} − {f(y)}·{s:.4g}"
    else:
        body = f"{name}[{first[i]}]·sin {angle} + {name}[{second[i]}]·cos {angle} = {f(x)}·{s:.4g} + {f(y)}·{c:.4g}"
    factor = f", yarn's factor {a:.4g} in cos and sin" if a != 1 else ""
    return f"= {body} = {f(cell.value)}   (pair {i}, position {p:g}, angle {p * theta:.4g} rad{factor})".replace("-", "−")


def _k_pe_explain(cell) -> str:
    raw = _raw(cell, cell.step.inputs[0], _m(cell)["w_kr"])
    return _turned(cell, raw, f"({cell.token(cell.at)}·W_KR)") + "; shared by every head, cached"


def _q_pe_explain(cell) -> str:
    m, h = _m(cell), cell.step.head
    raw = _raw(cell, cell.step.inputs[0], cell.scenario.w_q[h][:, m["nope"]:])
    return _turned(cell, raw, f"({cell.token(cell.at)}·W_QR)")


def _turned_sources(cell) -> dict:
    src = cell.step.inputs[0]
    i = frequencies.pair_of(cell.j, cell.rows(cell.step.id).shape[1], cell.scenario.rope["style"])
    return {**whole_row(src, cell.at, cell.rows(src).shape[1]), "freqs": [(i, 0)]}


_PE_WHY = ("Rotary positions cannot live in the latent: a rotated key depends on its position, and "
           "W_UK could no longer be folded into the queries. So positions travel in a few extra "
           "features of their own: one rotary key k_pe shared by every head (cached beside the latent), "
           "and each head's rotary query q_pe.")


def _pe_formula(name: str, w: str):
    def formula(ctx) -> str:
        src = {"x": "X", "norm_in": "N", "c_q": "C_Q"}[ctx.source() if name == "K_PE" else q_source(ctx)]
        prod = f"{w}·{src}" if ctx.columns else f"{src}·{w}"
        return f"{name} = RoPE({prod}): each pair turned by position·θ_i (freqs)"
    return formula


register(Kind("k_pe", "Rotary key (cached, shared)", ("token", "rope"), "input", _PE_WHY,
              formula=_pe_formula("K_PE", "W_KR"), explain=_k_pe_explain, sources=_turned_sources,
              inputs=lambda ctx, h: [ctx.source(), "freqs"], present=_on, tip=_TURNED), after="freqs")


# ------------------------------------------------------------------ each head's parts

def _q_nope_explain(cell) -> str:
    m, h = _m(cell), cell.step.head
    src = cell.step.inputs[0]
    return cell.project(cell.rows(src), cell.scenario.w_q[h][:, :m["nope"]], "W_UQ", cell.token(cell.at), at=cell.at)


def _k_nope_explain(cell) -> str:
    return cell.project(cell.rows("c_kv"), cell.scenario.w_k[cell.step.head], "W_UK", f"c_kv({cell.key_token(cell.i)})") + \
        "   (the key rebuilt from the cached latent)"


def _projection_formula(name: str, w: str, source):
    def formula(ctx) -> str:
        src = {"x": "X", "norm_in": "N", "c_q": "C_Q", "c_kv": "C_KV"}[source(ctx)]
        return f"{name} = {w}·{src}" if ctx.columns else f"{name} = {src}·{w}"
    return formula


register(Kind("q_nope", "Queries, without positions", ("token", "nope"), "head",
              "Each head's query has two parts: this one is compared with the keys rebuilt from the latent "
              "(it knows nothing of positions), q_pe with the shared rotary key.",
              formula=_projection_formula("Q_NOPE", "W_UQ", q_source), explain=_q_nope_explain, sources=_row_sources,
              inputs=lambda ctx, h: [q_source(ctx)], present=_on, tip=PRODUCTS), after="q")
register(Kind("q_pe", "Queries, rotary part", ("token", "rope"), "head", _PE_WHY,
              formula=_pe_formula("Q_PE", "W_QR"), explain=_q_pe_explain, sources=_turned_sources,
              inputs=lambda ctx, h: [q_source(ctx), "freqs"], present=_on, tip=_TURNED), after="q_nope")
register(Kind("k_nope", "Keys, rebuilt", ("token", "nope"), "kv",
              "Each head rebuilds its keys from the cached latent with its own up-projection W_UK: "
              "different heads look for different things in the same few numbers per token.",
              formula=_projection_formula("K_NOPE", "W_UK", lambda ctx: "c_kv"), explain=_k_nope_explain,
              sources=lambda cell: whole_row("c_kv", cell.i, cell.rows("c_kv").shape[1]),
              inputs=lambda ctx, h: ["c_kv"], present=_on, tip=PRODUCTS), after="k")


# ------------------------------------------------------------------ the absorbed form

def _q_latent_explain(cell) -> str:
    w_uk, src = cell.scenario.w_k[cell.step.head], cell.step.inputs[0]
    q = cell.rows(src)[cell.i, : w_uk.shape[1]]   # q_nope, or q_temp's first part
    return (f"= {parse(src).kind}({cell.token(cell.at)})·W_UK[{cell.j}, :] = {cell.dot(q, w_uk[cell.j])} = "
            f"{cell.f(cell.value)}   (W_UK folded into the query: it now speaks the latent's language)")


def _absorbed_explain(cell) -> str:
    q_latent, c_kv, q_pe, k_pe = (cell.rows(s) for s in cell.step.inputs)
    i, j, f = cell.i, cell.j, cell.f
    a, b = cell.names()
    rebuilt = cell.rows(cell.sid("scores"))[i, j]
    pe = parse(cell.step.inputs[2]).kind   # q_pe, or the warmed q_temp's last part
    return (f"= q_latent({a})·c_kv({b}) + {pe}({a})·k_pe({b}) = {cell.dot(q_latent[i], c_kv[j])} + "
            f"{cell.dot(q_pe[i, -k_pe.shape[1]:], k_pe[j])} = {f(cell.value)}   ({cell.sid('scores')} rebuilt {b}'s "
            f"key and got {f(rebuilt)}: the same score, read straight from the cache)")


def _absorbed_sources(cell) -> dict:
    q_latent, c_kv, q_pe, k_pe = cell.step.inputs
    width = lambda sid: cell.rows(sid).shape[1]  # noqa: E731
    return {q_latent: [(cell.i, m) for m in range(width(q_latent))], c_kv: [(cell.j, m) for m in range(width(c_kv))],
            q_pe: [(cell.i, m) for m in range(width(q_pe) - width(k_pe), width(q_pe))],
            k_pe: [(cell.j, m) for m in range(width(k_pe))]}


def _nope(ctx) -> str:
    return "Q_TEMP[:, :nope]" if ctx.has("q_temp") else "Q_NOPE"   # the warmed query's first part


def _pe(ctx) -> str:
    return "Q_TEMP[:, nope:]" if ctx.has("q_temp") else "Q_PE"


_ABSORBED_WHY = ("Why the cache can stay small: q_nope·k_nopeᵀ = q_nope·(c_kv·W_UK)ᵀ = (q_nope·W_UKᵀ)·c_kvᵀ. "
                 "Fold W_UK into the query once and the scores come straight from the cached latent; "
                 "no key is ever rebuilt. These are the scores again, computed that way.")

register(Kind("q_latent", "Queries, absorbed", ("token", "latent"), "head", _ABSORBED_WHY,
              formula=lambda ctx: f"Q_LATENT = W_UK·{_nope(ctx)}   (W_UK absorbed into the query)" if ctx.columns
              else f"Q_LATENT = {_nope(ctx)}·W_UKᵀ   (W_UK absorbed into the query)",
              explain=_q_latent_explain,
              sources=lambda cell: whole_row(cell.step.inputs[0], cell.i, cell.scenario.mla["nope"]),
              inputs=lambda ctx, h: [query_parts(ctx, h)[0]], present=lambda ctx: _on(ctx) and standard(ctx),
              tip="multiply the query by the row of W_UK number by number, then add the products"), after="scores")
register(Kind("absorbed", "Scores from the cache", ("query", "key"), "head", _ABSORBED_WHY,
              formula=lambda ctx: (f"S = C_KVᵀ·Q_LATENT + K_PEᵀ·{_pe(ctx)}   (the same S, from the cache)" if ctx.columns
                                   else f"S = Q_LATENT·C_KVᵀ + {_pe(ctx)}·K_PEᵀ   (the same S, from the cache)"),
              explain=_absorbed_explain, sources=_absorbed_sources,
              inputs=lambda ctx, h: [ctx.sid("q_latent", h), "c_kv", query_parts(ctx, h)[1], "k_pe"],
              present=lambda ctx: _on(ctx) and standard(ctx),
              tip="two dot products added: the absorbed query with the latent, the rotary query with the rotary key"),
         after="q_latent")


# ------------------------------------------------------------------ [decode]: the latent cache

def _cache_explain(cell) -> str:
    ref, f, key = parse(cell.step.id), cell.f, cell.key_token(cell.i)
    src, earlier = cell.step.inputs
    name = "c_kv" if cell.step.kind == "ckv_cache" else "k_pe"
    if cell.i < ref.token:
        return f"= {earlier}[{key}, {cell.j}] = {f(cell.value)}   (cached when {key} arrived: read, not recomputed)"
    return (f"= {src}[{key}, {cell.j}] = {f(cell.value)}   (token {key}'s {name}, computed now and appended; "
            f"{cache_words(cell.scenario)})")


def _cache_sources(cell) -> dict:
    src, earlier = cell.step.inputs
    return {earlier if cell.i < parse(cell.step.id).token else src: [(cell.i, cell.j)]}


for _name, _what, _width in (("ckv_cache", "Latent cache", "latent"), ("kpe_cache", "Rotary key cache", "rope")):
    register(Kind(
        _name, _what, ("key", _width), "cache",
        "A decoder under latent attention caches only each token's latent c_kv and its rotary key k_pe: "
        "a new token appends one row of each, and every head reads its scores from them directly (W_UK "
        "absorbed into its query) and rebuilds the values it needs.",
        formula=lambda ctx: "[cache; this token's row]", explain=_cache_explain, sources=_cache_sources,
        inputs=lambda ctx, h: [], present=lambda ctx: _on(ctx) and ctx.dims.prompt is not None))
