"""The mechanisms of today's checkpoints in plain NumPy, written from the papers' formulas apart from
`tracer/` (no shared code): QK-norm, scaled rotary frequencies (linear, llama3, yarn), partial rotary,
soft-capping, ALiBi, the streaming mask and a norm of the output, in the rows orientation."""
from __future__ import annotations

import math

import numpy as np


def rms(a, gain, eps):
    """Each row of a divided by its root mean square, times the gain."""
    return a / np.sqrt((a * a).mean(axis=-1, keepdims=True) + eps) * gain


def frequencies(d, base, scaling):
    """θ_i = base^(−2i/d), then scaled (Llama 3's wavelength bands; YaRN's ramp over the pairs
    that turn between beta_slow and beta_fast times in the original context)."""
    theta = base ** (-np.arange(0, d, 2) / d)
    if scaling is None:
        return theta
    f = scaling["factor"]
    if scaling["type"] == "linear":
        return theta / f
    L = scaling["original_max_position_embeddings"]
    wavelength = 2 * np.pi / theta
    if scaling["type"] == "llama3":
        lo, hi = scaling["low_freq_factor"], scaling["high_freq_factor"]
        smooth = (L / wavelength - lo) / (hi - lo)
        mid = (1 - smooth) * theta / f + smooth * theta
        return np.where(wavelength < L / hi, theta, np.where(wavelength > L / lo, theta / f, mid))
    dim = lambda r: d * math.log(L / (r * 2 * math.pi)) / (2 * math.log(base))  # noqa: E731
    lo, hi = max(math.floor(dim(scaling.get("beta_fast", 32))), 0), min(math.ceil(dim(scaling.get("beta_slow", 1))), d - 1)
    ramp = np.clip((np.arange(d // 2) - lo) / ((hi - lo) or 0.001), 0, 1)
    return theta / f * ramp + theta * (1 - ramp)


def rotate(a, rope):
    """Rotary positions with partial dims and yarn's factor on cos and sin."""
    n, d_k = a.shape
    d = rope.get("dims") or d_k
    s = rope.get("scaling")
    factor = (s.get("attention_factor", 0.1 * math.log(s["factor"]) + 1) if s and s["type"] == "yarn" else 1.0)
    where = rope.get("positions", rope.get("offset", 0) + np.arange(n))
    angle = np.outer(np.asarray(where, dtype=float), frequencies(d, rope["base"], s))
    cos, sin = np.cos(angle) * factor, np.sin(angle) * factor
    out = a.copy()
    for i in range(d // 2):
        j, k = (i, i + d // 2) if rope["style"] == "half" else (2 * i, 2 * i + 1)
        out[:, j] = a[:, j] * cos[:, i] - a[:, k] * sin[:, i]
        out[:, k] = a[:, j] * sin[:, i] + a[:, k] * cos[:, i]
    return out


def allowed(mask, n):
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    if mask == "none":
        return np.ones((n, n), bool)
    if mask == "causal":
        return j <= i
    kind, *numbers = mask.split(":")
    if kind == "sliding":
        return (j <= i) & (i - j < int(numbers[0]))
    sinks, window = map(int, numbers)
    return (j <= i) & ((j < sinks) | (i - window < j))


def reference(a: dict, mask: str = "causal", by_hand: bool = False) -> dict:
    """Every step of the layer by id (rows orientation), from `a`: from_arrays' keywords, rows layout.
    by_hand: the worksheet's arithmetic, ⌊s ÷ round(√d_k)⌋ and powers of 3 (the weights are the same
    with or without each query's max subtracted)."""
    x, H, G = a["x"], len(a["q"]), len(a["k"])
    q = [x @ w for w in a["q"]]
    k = [x @ w for w in a["k"]]
    v = [x @ w for w in a["v"]]
    out = {}
    after = a.get("qk_norm_after_rope", False)   # nanochat, Llama 4: turned first, normed after
    if after:
        q, k = [rotate(m, a["rope"]) for m in q], [rotate(m, a["rope"]) for m in k]
        out.update({f"h{h}.q_rot": q[h] for h in range(H)})
    if "q_norm" in a:
        eps = a.get("qk_norm_eps", 1e-6)
        gain = lambda g: 1.0 if isinstance(g, str) else g   # "l2": no gain  # noqa: E731
        if a.get("qk_norm_scope", "head") == "head":
            q = [rms(m, gain(g), eps) for m, g in zip(q, a["q_norm"])]
            k = [rms(m, gain(g), eps) for m, g in zip(k, a["k_norm"])]
        else:   # every head's q side by side, normed over the whole width, then split again
            q = np.split(rms(np.concatenate(q, 1), np.concatenate(a["q_norm"]), eps), H, axis=1)
            k = np.split(rms(np.concatenate(k, 1), np.concatenate(a["k_norm"]), eps), G, axis=1)
        out.update({f"h{h}.q_norm": q[h] for h in range(H)})
    if a.get("rope") and not after:
        q, k = [rotate(m, a["rope"]) for m in q], [rotate(m, a["rope"]) for m in k]
        out.update({f"h{h}.q_rot": q[h] for h in range(H)})
    ok, n, zs = allowed(mask, len(x)), len(x), []
    for h in range(H):
        g = h * G // H
        d_k = q[h].shape[1]
        s = np.floor(q[h] @ k[g].T / max(1, round(math.sqrt(d_k)))) if by_hand else q[h] @ k[g].T / math.sqrt(d_k)
        if a.get("softcap"):
            s = out[f"h{h}.capped"] = a["softcap"] * np.tanh(s / a["softcap"])
        if a.get("alibi") is not None:
            s = out[f"h{h}.biased"] = s - a["alibi"][h] * (np.arange(n)[:, None] - np.arange(n)[None, :])
        s = np.where(ok, s, -np.inf)
        e = (3.0 if by_hand else math.e) ** (s - s.max(axis=1, keepdims=True))
        w = out[f"h{h}.weights"] = e / e.sum(axis=1, keepdims=True)
        z = out[f"h{h}.z"] = w @ v[g]
        zs.append(z)
    if "o" not in a:
        return out
    y = out["out"] = np.concatenate(zs, 1) @ a["o"]
    if "out_norm" in a:
        y = out["out_norm"] = rms(y, a["out_norm"]["gain"], a["out_norm"]["eps"])
    out["residual"] = x + y
    return out


# ---------------------------------------------------------------- a layer with every mechanism, drawn

def slopes(heads: int) -> np.ndarray:
    """ALiBi's slopes as Press et al. give them: 2^(−8h/P) for the power of two P ≤ heads, then every
    other one of 2P's for the rest."""
    p = 2 ** int(math.log2(heads))
    own = [2.0 ** (-8.0 * h / p) for h in range(1, p + 1)]
    more = [2.0 ** (-8.0 * h / (2 * p)) for h in range(1, 2 * p + 1, 2)][:heads - p]
    return np.array(own + more)


SCALINGS = [None, dict(type="linear", factor=4.0),
            dict(type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=40),
            dict(type="yarn", factor=4.0, original_max_position_embeddings=40, beta_fast=8.0, beta_slow=1.0)]


def layer(rng, n, heads, groups, d_k, *, scope="head", scaling=None, dims=None, softcap=None, alibi=False,
          norm=True, out_norm=True, style="half"):
    d = 6
    r = lambda *shape: rng.normal(size=shape)  # noqa: E731
    a = dict(x=r(n, d), q=list(r(heads, d, d_k)), k=list(r(groups, d, d_k)), v=list(r(groups, d, d_k)),
             o=r(heads * d_k, d), residual=dict(norm="none"))
    if norm:
        a.update(q_norm=list(r(heads, d_k)), k_norm=list(r(groups, d_k)), qk_norm_eps=1e-5, qk_norm_scope=scope)
    if style:
        a["rope"] = dict(base=30.0, style=style, offset=3, **({"scaling": scaling} if scaling else {}),
                         **({"dims": dims} if dims else {}))
    if softcap:
        a["softcap"] = softcap
    if alibi:
        a["alibi"] = slopes(heads) * 4
    if out_norm:
        a["out_norm"] = dict(kind="rms", gain=r(d), eps=1e-6)
    return a
