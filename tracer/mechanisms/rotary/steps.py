"""Rotary positions: each pair's frequency (after any scaling for long contexts), then each head's
queries and each key/value head's keys, turned pair by pair by an angle that grows with the
token's position, so that q·k depends on how far apart they are."""
from __future__ import annotations

import numpy as np

from ...steps.base import Kind, register
from . import frequencies

_SCALED = {"linear": "every θ ÷ {factor:g}",
           "llama3": "llama3 ×{factor:g}: slow pairs θ ÷ {factor:g}, fast ones kept, a blend between",
           "yarn": "yarn ×{factor:g}: θ ÷ {factor:g} to θ along a ramp, cos and sin × {a:.4g}"}


def _theta(spec: dict, latent: bool = False) -> str:
    return f"θ_i = {spec['base']:g}^(−2i/{'r' if spec.get('dims') or latent else 'd_k'})"


def _scaling_words(spec: dict) -> str:
    s = spec.get("scaling")
    if s is not None and s["type"] == "proportional":
        return f"; proportional: only the first {s['fraction']:g} of the pairs turn, θ ÷ {s['factor']:g}"
    return "" if s is None else "; " + _SCALED[s["type"]].format(factor=s["factor"], a=frequencies.attention_factor(spec))


def _formula(name: str):
    def formula(ctx) -> str:
        spec = ctx.dims.rope
        r = spec.get("dims")
        pair = ("(i, i + r/2)" if r else "(i, i + d_k/2)") if spec["style"] == "half" else "(2i, 2i + 1)"
        part = f", the first r = {r} features only" if r else ""
        part += ", θ_i and p·θ_i in float32" if spec.get("angles") == "float32" else ""
        factor = f"·{frequencies.attention_factor(spec):.4g}" if frequencies.attention_factor(spec) != 1 else ""
        return (f"{name} with each pair {pair} of position p turned by p·θ_i (freqs){part}{factor}"
                "   (cos and sin: decimals, even by hand)")
    return formula


def _explain(cell) -> str:
    spec, src = cell.scenario.rope, cell.rows(cell.step.inputs[0])
    d_k, j, f = frequencies.rotary_dims(spec, src.shape[1]), cell.j, cell.f
    name = cell.step.inputs[0]
    i = frequencies.pair_of(j, d_k, spec["style"])
    if i is None:
        return f"= {name}[{cell.j}] = {f(cell.value)}   (feature {j} is past the first {d_k}: it does not rotate)"
    first, second = frequencies.pairs(d_k, spec["style"])
    p = frequencies.positions(spec, cell.at + 1)[-1]
    theta = float(cell.rows("freqs")[i, 0])
    a = frequencies.attention_factor(spec)
    rad = float(frequencies.angles(spec, p, theta))
    c, s = float(np.cos(rad)) * a, float(np.sin(rad)) * a
    x, y = src[cell.i, first[i]], src[cell.i, second[i]]
    who = cell.key_token(cell.i) if cell.step.kind == "k_rot" else cell.token(cell.i)
    angle = f"{p:g}θ{_sub(i)}"
    left, right = (f"{a:.4g}·(", ")") if a != 1 else ("", "")   # yarn's factor on cos and sin
    if j == first[i]:
        body = (f"= {left}{name}[{who},{first[i]}]·cos {angle} − {name}[{who},{second[i]}]·sin {angle}{right}"
                f" = {f(x)}·{c:.4g} − {f(y)}·{s:.4g} = {f(cell.value)}")
    else:
        body = (f"= {left}{name}[{who},{first[i]}]·sin {angle} + {name}[{who},{second[i]}]·cos {angle}{right}"
                f" = {f(x)}·{s:.4g} + {f(y)}·{c:.4g} = {f(cell.value)}")
    extra = f", yarn's factor {a:.4g} folded into cos and sin" if a != 1 else ""
    extra += ", formed in float32" if spec.get("angles") == "float32" else ""
    return (f"{body}   (pair {i}, position {p:g}, θ{_sub(i)} = {theta:.4g}, angle {rad:.4g} rad{extra})"
            .replace("-", "−"))


def _on(ctx) -> bool:
    return ctx.dims.rope is not None


def _sub(i: int) -> str:
    return str(i).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))


def _sources(cell) -> dict:
    src = cell.step.inputs[0]
    spec = cell.scenario.rope
    d_k = frequencies.rotary_dims(spec, cell.rows(src).shape[1])
    i = frequencies.pair_of(cell.j, d_k, spec["style"])
    if i is None:
        return {src: [(cell.i, cell.j)]}
    first, second = frequencies.pairs(d_k, spec["style"])
    return {src: [(cell.i, int(first[i])), (cell.i, int(second[i]))], "freqs": [(i, 0)]}


_WHY = ("Attention by itself does not know word order. RoPE turns each pair of features by an angle "
        "proportional to the token's position; the dot product of a turned query and a turned key then "
        "depends on the difference of their positions: how far apart they are, not where they are.")


def _freqs_explain(cell) -> str:
    spec, i = cell.scenario.rope, cell.i
    d = 2 * cell.scenario.dims().pairs
    theta = float(frequencies.plain(d, spec["base"])[i])
    plain = f"{spec['base']:g}^(−{2 * i}/{d}) = {theta:.4g}"
    wave = f"one turn every {2 * np.pi / abs(cell.value):.4g} positions" if cell.value else "it does not turn"
    s = spec.get("scaling")
    if spec.get("angles") == "float32":   # what the scaling (if any) started from, as PyTorch rounds it
        plain += f", in float32 {float(frequencies.plain32(d, spec['base'])[i]):.8g}"
    if spec.get("sign") == -1:
        plain = f"−{spec['base']:g}^(−{2 * i}/{d}) = {-theta:.4g}"
        wave += "; turned the other way, by −p·θ (nanochat)"
    if s is not None and s["type"] == "proportional":
        still = frequencies.turning(spec, d)
        if i >= still:
            return f"= 0   (pair {i} of {d // 2} does not turn: proportional rotary turns only the first {still})"
        return f"= {plain} ÷ {s['factor']:g} = {cell.value:.4g}   (pair {i}: {wave})".replace("-", "−")
    if s is None:
        return f"= {plain}   (pair {i}: {wave})"
    moved = float(frequencies.slowed(spec, d)[i])
    how = {0.0: "kept", 1.0: f"÷ {s['factor']:g}"}.get(moved, f"moved {moved:.4g} of the way to ÷ {s['factor']:g}")
    return f"= {plain}, {how} = {cell.value:.4g}   (pair {i}: {_why_moved(spec, d, i)}; now {wave})".replace("-", "−")


def _why_moved(spec: dict, d: int, i: int) -> str:
    """Why scaling moved pair i as it did, in the type's own terms."""
    s = spec["scaling"]
    if s["type"] == "linear":
        return "linear scaling slows every pair alike"
    original = s["original_max_position_embeddings"]
    turns = original * float(frequencies.plain(d, spec["base"])[i]) / (2 * np.pi)
    said = f"{turns:.4g} turns in the original {original:g} positions"
    if s["type"] == "llama3":
        return (f"{said}; llama3 keeps a pair that turns over {s['high_freq_factor']:g} times, divides one under "
                f"{s['low_freq_factor']:g}, blends between")
    low, high = frequencies.yarn_range(spec, d)
    return (f"{said}; yarn's ramp runs from pair {low} (β_fast = {s['beta_fast']:g} turns: kept) to pair {high} "
            f"(β_slow = {s['beta_slow']:g}: divided)")


register(Kind(
    "freqs", "Rotary frequencies", ("pair", "one"), "input",
    "Each pair of features turns at its own speed θ_i: the first pair fast (local order), the last "
    "ones slowly (long distances). A model stretched to longer contexts slows some pairs down (linear, "
    "llama3 and yarn scaling) so that far positions still look like angles it has seen in training.",
    formula=lambda ctx: _theta(ctx.dims.rope, bool(ctx.dims.latent)) + _scaling_words(ctx.dims.rope),
    explain=_freqs_explain, sources=lambda cell: {}, inputs=lambda ctx, h: [],
    present=_on), after="v")
register(Kind("q_rot", "Queries, rotated", ("token", "d_k"), "head", _WHY, _formula("Q"), _explain, _sources,
              inputs=lambda ctx, h: [ctx.latest(h, "query", "q_rot"), "freqs"],
              present=lambda ctx: _on(ctx) and not ctx.dims.latent, chain="query"), after="freqs")
register(Kind("k_rot", "Keys, rotated", lambda ctx: ("context", "d_k") if ctx.cross else ("token", "d_k"), "kv",
              _WHY, _formula("K"), _explain, _sources,
              inputs=lambda ctx, h: [ctx.latest(h, "key", "k_rot"), "freqs"],
              present=lambda ctx: _on(ctx) and not ctx.dims.latent, chain="key"), after="q_rot")
