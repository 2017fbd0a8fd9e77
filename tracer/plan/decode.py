"""The plan of a [decode] run: the input, the prompt's P tokens at once (`prefill.` ids), then each
later token t alone against the cache of every token before it (`t{t}.` ids), in that order."""
from __future__ import annotations

from dataclasses import replace

from ..ids import parse, step_id
from ..steps import KINDS, Context, Dims, Step
from .layer import context, latent_axes, layer_plan

DECODED = ("q", "q_rot", "scores", "scaled", "exp", "sums", "weights", "z")   # a head's kinds per token
LAYER = ("concat", "out", "residual", "norm")


def _formulas(ctx: Context) -> dict:
    """Each per-token kind's formula: the standard one, written for one row against the cache."""
    src = {"x": "x", "norm_in": "n"}[ctx.source()]
    cols = ctx.columns
    out = {kind: KINDS[kind].formula(ctx) for kind in ("scaled", "exp", "concat", "out", "residual", "norm")
           if kind in KINDS}
    out.update(
        q=f"q_t = W_Q·{src}_t" if cols else f"q_t = {src}_t·W_Q",
        q_rot="q_t turned by its own position t",
        scores="s = K_cacheᵀ·q_t" if cols else "s = q_t·K_cacheᵀ",
        sums="Σ of the powers", weights="a = powers ÷ sums" if ctx.arithmetic.normalize == "softmax" else "a = max(0, s)",
        z="z_t = V_cache·a" if cols else "z_t = a·V_cache",
        k_cache=KINDS["k_cache"].formula(ctx), v_cache=KINDS["v_cache"].formula(ctx))
    if ctx.dims.latent:   # latent attention: the cache holds c_kv and k_pe; the scores read it absorbed
        out.update({kind: KINDS[kind].formula(ctx) for kind in ("q_nope", "q_pe", "q_latent")},
                   scores="s = C_cache·q_latent + K_PE_cache·q_pe   (absorbed: no key rebuilt)" if cols else
                   "s = q_latent·C_cacheᵀ + q_pe·K_PE_cacheᵀ   (absorbed: no key rebuilt)",
                   v="V = C_cache·W_UV   (the values rebuilt from the cached latent)",
                   z="z_t = V·a" if cols else "z_t = a·V")
    return out


def decode_plan(dims: Dims, arithmetic, layout: str) -> list[Step]:
    """Input steps, the prefill's steps (a causal run of the first P tokens, ids prefixed), then
    per decoded token: its heads' steps (a group's cache once, before its first head) and the layer's."""
    if arithmetic.online:
        from ..errors import ScenarioError
        raise ScenarioError("algorithm", "expected standard with [decode] (a decoded token's scores are one "
                            "row already: there is no n × n matrix to avoid)")
    full = layer_plan(replace(dims, prompt=None), arithmetic, layout, "causal")
    steps = [s for s in full if s.head is None and s.group is None and KINDS[s.kind].scope == "input"]
    inputs = {s.id for s in steps}
    prefix = lambda sid: sid if sid in inputs else replace(parse(sid), prefill=True).id  # noqa: E731
    for s in layer_plan(replace(dims, prompt=None, n=dims.prompt, m=None), arithmetic, layout, "causal"):
        if s.id not in inputs:
            steps.append(replace(s, id=prefix(s.id), inputs=tuple(prefix(i) for i in s.inputs)))
    ctx = context(dims, arithmetic, layout == "columns", "causal")
    formulas = _formulas(ctx)
    for t in range(dims.prompt, dims.n):
        steps += _token(ctx, t, formulas)
    return steps


def _token(ctx: Context, t: int, formulas: dict) -> list[Step]:
    dims, cols, steps = ctx.dims, ctx.columns, []
    per = dims.heads // dims.kv_heads
    size = dict(token=1, query=1, key=t + 1, d_k=dims.d_k, d_v=dims.d_v, one=1, d_out=dims.d_out, d_model=dims.d_model,
                **latent_axes(dims), **{"token·d_k": dims.d_k})

    def add(kind, inputs, head=None, group=None, width=None, formula=None):
        axes = KINDS[kind].axes(ctx) if callable(KINDS[kind].axes) else KINDS[kind].axes
        axes = ("key", axes[1]) if kind in ("k_cache", "v_cache", "ckv_cache", "kpe_cache") or \
            (kind == "v" and dims.latent) else axes
        shape = (size[axes[0]], width or size[axes[1]])
        starts = (0 if axes[0] == "key" else t, 0)
        if cols:
            axes, shape, starts = axes[::-1], shape[::-1], starts[::-1]
        word = KINDS[kind].word   # the kind as ids write it (a linear layer's z is `linear_z` in the registry)
        sid = step_id(word, head, group=group, token=t)
        steps.append(Step(sid, word, head, formula or formulas[kind], tuple(inputs), tuple(axes), tuple(shape), group,
                          key="" if word == kind else kind, starts=tuple(starts), about=KINDS[kind].why_in(ctx)))
        return sid

    if dims.latent:
        _latent_token(ctx, t, add)
        return steps
    if dims.of("linear") is not None:   # the state carried from token to token (mechanisms/linear)
        from ..mechanisms.linear.decode import plan_token
        plan_token(ctx, t, add, _layer)
        return steps

    def cache(kind, g):
        scope = dict(group=g) if dims.grouped else dict(head=g)
        earlier = (step_id(kind, **scope, token=t - 1) if t > dims.prompt else
                   step_id({"k_cache": "k_rot" if dims.rope else "k", "v_cache": "v"}[kind], **scope, prefill=True))
        return add(kind, [ctx.source(), earlier], **scope)

    zs = []
    for h in range(dims.heads):
        g = h // per
        if not dims.grouped or h % per == 0:
            kc, vc = cache("k_cache", g if dims.grouped else h), cache("v_cache", g if dims.grouped else h)
        q = add("q", [ctx.source()], h)
        if dims.rope:
            q = add("q_rot", [q], h)
        zs.append(_attend(ctx, add, h, [q, kc], lambda: vc))
    _layer(ctx, zs, add)
    return steps


def _attend(ctx: Context, add, h: int, factors: list[str], values) -> str:
    """A decoded token's row of head h: scores from `factors`, scaled, the softmax's steps (or
    relu's), then z over the values (`values()` adds their step when they have one): z's id."""
    s = add("scaled", [add("scores", factors, h)], h)
    if ctx.arithmetic.normalize == "softmax":
        e = add("exp", [s], h)
        w = add("weights", [e, add("sums", [e], h)], h)
    else:
        w = add("weights", [s], h)
    return add("z", [w, values()], h)


def _layer(ctx: Context, zs: list[str], add) -> None:
    """A decoded token's layer-wide steps after its heads: concat, out, residual, norm."""
    dims = ctx.dims
    y = zs[0]
    if dims.heads > 1:
        y = add("concat", zs, width=dims.heads * dims.d_v)
    if dims.output:
        y = add("out", [y])
    if dims.residual is not None:
        y = add("residual", ["x", y])
        if dims.residual == "layer":
            add("norm", [y])


def _latent_token(ctx: Context, t: int, add) -> None:
    """A decoded token under latent attention: the cache grows by its c_kv and k_pe row; each head
    makes its query, absorbs W_UK into it and reads the scores straight from the cache."""
    from ..mechanisms.latent.steps import q_source
    dims = ctx.dims
    rank, rope, *_ = dims.latent
    heads, d_v = dims.heads, dims.d_v
    before = lambda kind: "c_kv" if t == dims.prompt else step_id(kind, token=t - 1)  # noqa: E731
    cached = (t + 1) * (rank + rope)
    said = f"{t + 1} tokens × ({rank} + {rope}) = {cached} numbers, where multi-head attention's cache would hold {(t + 1) * 2 * heads * d_v}"
    c = add("ckv_cache", ["c_kv", before("ckv_cache")], formula=f"[C_cache; c_kv_t]   (the cache with k_pe: {said})")
    p = add("kpe_cache", ["k_pe", "k_pe" if t == dims.prompt else step_id("kpe_cache", token=t - 1)],
            formula="[K_PE_cache; k_pe_t]   (one rotary key a token, shared by every head)")
    zs = []
    for h in range(heads):
        q = add("q_nope", [q_source(ctx)], h)
        qp = add("q_pe", [q_source(ctx), "freqs"], h)
        zs.append(_attend(ctx, add, h, [add("q_latent", [q], h), c, qp, p], lambda: add("v", [c], h)))
    _layer(ctx, zs, add)
