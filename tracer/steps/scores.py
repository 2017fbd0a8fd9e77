"""Comparing queries with keys: the raw scores, their scaling, and the mask."""
from __future__ import annotations

from ..ids import parse
from ..masks import describe
from .base import Kind, register, said


def standard(ctx) -> bool:
    """The n × n steps exist only under the standard algorithm (online never forms them), and never
    in a linear layer (it keeps a state instead: mechanisms/linear)."""
    return not ctx.arithmetic.online and ctx.dims.of("linear") is None


def _scores_explain(cell) -> str:
    if len(cell.step.inputs) == 4:   # latent attention: two products, without and with positions
        return _latent_scores(cell)
    from ..score_parts import explain   # its exact parts: one per feature, or per rotary pair
    return explain(cell)


_CACHED = {"ckv_cache": "c_kv", "kpe_cache": "k_pe"}   # a decoded token reads them from the cache


def _latent_scores(cell) -> str:
    """Latent attention: q_nope·k_nope + q_pe·k_pe, or (a decoded token) q_latent·c_kv + q_pe·k_pe
    with the latent and the rotary key read from the cache."""
    q1, k1, q2, k2 = (cell.rows(s) for s in cell.step.inputs)
    n1, m1, n2, m2 = (_CACHED.get(parse(s).kind, parse(s).kind) for s in cell.step.inputs)
    i, j = cell.i, cell.j
    a, b = cell.names()
    why = "absorbed: both read from the cache" if m1 == "c_kv" else "content, then position"
    if n1 == n2:   # one warmed query, q_temp = [q_nope | q_pe]·τ: its first part meets k_nope, its last k_pe
        why += f"; {n1}'s first {k1.shape[1]} numbers, then its last {k2.shape[1]}"
    return (f"= {n1}({a})·{m1}({b}) + {n2}({a})·{m2}({b}) = {cell.dot(q1[i, : k1.shape[1]], k1[j])} + "
            f"{cell.dot(q2[i, -k2.shape[1]:], k2[j])} = {cell.f(cell.value)}   ({why})")


def _latent_formula(ctx) -> str:
    if ctx.has("q_temp"):   # the warmed query [q_nope | q_pe]·τ, its two parts against the two keys
        return "S = [K_NOPE | K_PE]ᵀ·Q_TEMP" if ctx.columns else "S = Q_TEMP·[K_NOPE | K_PE]ᵀ"
    return "S = K_NOPEᵀ·Q_NOPE + K_PEᵀ·Q_PE" if ctx.columns else "S = Q_NOPE·K_NOPEᵀ + Q_PE·K_PEᵀ"


def _scores_sources(cell) -> dict:
    rows = cell.step.inputs[0::2]   # the query factors (by query), then the key factors (by key)
    return {sid: [(cell.i if sid in rows else cell.j, m) for m in range(cell.rows(sid).shape[1])]
            for sid in cell.step.inputs}


def query_parts(ctx, h) -> tuple[str, str]:
    """Latent attention's query as the scores read it, by part (without positions, rotary): q_nope
    and q_pe, or both from the warmed q_temp = [q_nope | q_pe]·τ when a temperature warms them."""
    return (ctx.sid("q_temp", h),) * 2 if ctx.has("q_temp") else (ctx.sid("q_nope", h), ctx.sid("q_pe", h))


def _scores_inputs(ctx, h) -> list[str]:
    if ctx.dims.latent:   # latent attention (mechanisms/latent): content, then position
        q_nope, q_pe = query_parts(ctx, h)
        return [q_nope, ctx.sid("k_nope", h), q_pe, "k_pe"]
    return [ctx.latest(h, "query", "scores"), ctx.latest(h, "key", "scores")]


def _same_cell(cell) -> dict:
    return {cell.step.inputs[0]: [(cell.i, cell.j)]}


register(Kind(
    "scores", "Scores", ("query", "key"), "head",
    "Each score is the dot product of one query with one key: large when they point the same "
    "way, a similarity. Every query is compared with every key.",
    formula=lambda ctx: _latent_formula(ctx) if ctx.dims.latent else "S = Kᵀ·Q" if ctx.columns else "S = Q·Kᵀ",
    explain=_scores_explain, sources=_scores_sources,
    inputs=_scores_inputs, present=standard, chain="logits",
    tip="multiply the query and the key number by number, then add the products (with a latent, both parts)"))


def _scaled_formula(ctx) -> str:
    a, d_k = ctx.arithmetic, ctx.dims.d_k
    c = a.scale_divisor(d_k)
    if a.scale == "sqrt":
        return f"S ÷ √d_k = S ÷ √{d_k}"
    if a.scale == "floor":
        return f"⌊S ÷ {c:g}⌋   (÷{c:g} stands in for ÷√{d_k})"
    return "S   (not scaled)" if c is None else f"S ÷ {c:g}"


def _scaled_explain(cell) -> str:
    a, d_k, f = cell.arithmetic, cell.scenario.d_k, cell.f
    s, c = cell.rows(cell.step.inputs[0])[cell.i, cell.j], a.scale_divisor(d_k)
    if a.scale == "floor":
        return f"= ⌊{f(s)} ÷ {c:g}⌋ = {f(cell.value)}"
    if a.scale == "sqrt":
        return f"= {f(s)} ÷ √{d_k} = {f(s)} ÷ {c:.4g} = {f(cell.value)}"
    if c is None:
        return f"= {f(s)}   (not scaled)"
    return f"= {f(s)} ÷ {c:g} = {f(cell.value)}"


register(Kind(
    "scaled", "Scaled scores", ("query", "key"), "head",
    "A dot product of d_k random terms has a spread that grows like √d_k; dividing by √d_k keeps "
    "the scores in a range where softmax does not saturate into all-or-nothing. The by-hand "
    "arithmetic (scale = floor) divides by √d_k rounded and keeps the whole part, ⌊s ÷ round(√d_k)⌋, "
    "so that every number stays a whole number.",
    formula=_scaled_formula, explain=_scaled_explain, sources=_same_cell,
    inputs=lambda ctx, h: [ctx.sid("scores", h)], present=standard, chain="logits",
    tip="divide the score by the scale; with ⌊ ⌋, round down to the whole number at or below"))


def _masked_explain(cell) -> str:
    told = said("masked.explain", cell)   # an additive mask's, a key the indexer dropped (mechanisms/)
    if told is not None:
        return told
    s = cell.rows(cell.step.inputs[0])[cell.i, cell.j]
    query, key = cell.token(cell.i), cell.key_token(cell.j)
    if cell.trace.allowed[cell.i, cell.j]:
        return f"= {cell.f(s)}   (query {query} may see key {key})"
    return f"= −∞   (key {key} {describe(cell.trace.mask, cell.at, cell.starts[1] + cell.j)} query {query}: masked)"


_MASK_FORMULA = {"causal": "S, with −∞ where the key comes after the query (causal)",
                 "causal_lower_right": "S, with −∞ where key j > i + (keys − queries) (causal, lower right)",
                 "matrix": "S, with −∞ where the mask forbids the key"}

def _masked_formula(ctx) -> str:
    told = said("masked.formula", ctx)   # an additive mask's, the indexer's choice (mechanisms/)
    if told is not None:
        return told
    mask = ctx.mask if isinstance(ctx.mask, str) else "matrix"
    if mask.startswith("streaming:"):
        kept, width = mask.split(":")[1:]   # StreamingLLM's first tokens kept, then a window
        first = "first key" if kept == "1" else f"first {kept} keys"
        return f"S, with −∞ except on the {first} and the last {width} (streaming)"
    if mask.startswith("chunked:"):
        return f"S, with −∞ where j > i or ⌊j/{mask.partition(':')[2]}⌋ ≠ ⌊i/{mask.partition(':')[2]}⌋ (chunked)"
    if mask.startswith("sliding:"):
        return f"S, with −∞ outside the window of the last {mask.partition(':')[2]} keys (sliding)"
    return _MASK_FORMULA[mask]


register(Kind(
    "masked", "Masked scores", ("query", "key"), "head",
    "A mask hides some keys from some queries (a GPT-style model must not see the words after the "
    "one it predicts): those scores become −∞, whose power is exactly 0, so they get no weight at all.",
    formula=_masked_formula,
    explain=_masked_explain, sources=_same_cell,
    inputs=lambda ctx, h: [ctx.latest(h, "logits", "masked")], present=lambda ctx: ctx.masked and standard(ctx),
    chain="logits", tip="a key the query may see keeps its scaled score; a hidden key becomes minus infinity"))
