"""The mechanisms of today's checkpoints (CONTRACT §13), written by hand, against a NumPy layer written
here from the papers' formulas: QK-norm (per head and over the whole width), rotary frequencies scaled
by linear, llama3 and yarn (with its attention factor) and partial rotary, soft-capping, ALiBi, the
streaming mask and a norm of the output; both layouts, float64 and float32, the stage and the fused paths."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tracer


# ---------------------------------------------------------------- the reference, from the formulas

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
    angle = np.outer(rope.get("offset", 0) + np.arange(n), frequencies(d, rope["base"], s))
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


def reference(a: dict, mask: str = "causal") -> dict:
    """Every step of the layer by id (rows orientation), from `a`: from_arrays' keywords, rows layout."""
    x, H, G = a["x"], len(a["q"]), len(a["k"])
    q = [x @ w for w in a["q"]]
    k = [x @ w for w in a["k"]]
    v = [x @ w for w in a["v"]]
    out = {}
    if "q_norm" in a:
        eps = a.get("qk_norm_eps", 1e-6)
        if a.get("qk_norm_scope", "head") == "head":
            q = [rms(m, g, eps) for m, g in zip(q, a["q_norm"])]
            k = [rms(m, g, eps) for m, g in zip(k, a["k_norm"])]
        else:   # every head's q side by side, normed over the whole width, then split again
            q = np.split(rms(np.concatenate(q, 1), np.concatenate(a["q_norm"]), eps), H, axis=1)
            k = np.split(rms(np.concatenate(k, 1), np.concatenate(a["k_norm"]), eps), G, axis=1)
        out.update({f"h{h}.q_norm": q[h] for h in range(H)})
    if a.get("rope"):
        q, k = [rotate(m, a["rope"]) for m in q], [rotate(m, a["rope"]) for m in k]
        out.update({f"h{h}.q_rot": q[h] for h in range(H)})
    ok, n, zs = allowed(mask, len(x)), len(x), []
    for h in range(H):
        g = h * G // H
        s = q[h] @ k[g].T / math.sqrt(q[h].shape[1])
        if a.get("softcap"):
            s = out[f"h{h}.capped"] = a["softcap"] * np.tanh(s / a["softcap"])
        if a.get("alibi") is not None:
            s = out[f"h{h}.biased"] = s - a["alibi"][h] * (np.arange(n)[:, None] - np.arange(n)[None, :])
        s = np.where(ok, s, -np.inf)
        e = np.exp(s - s.max(axis=1, keepdims=True))
        w = out[f"h{h}.weights"] = e / e.sum(axis=1, keepdims=True)
        z = out[f"h{h}.z"] = w @ v[g]
        zs.append(z)
    y = out["out"] = np.concatenate(zs, 1) @ a["o"]
    if "out_norm" in a:
        y = out["out_norm"] = rms(y, a["out_norm"]["gain"], a["out_norm"]["eps"])
    out["residual"] = x + y
    return out


# ---------------------------------------------------------------- a layer with every mechanism

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
        a["alibi"] = tracer.alibi_slopes(heads) * 4
    if out_norm:
        a["out_norm"] = dict(kind="rms", gain=r(d), eps=1e-6)
    return a


def columns(a: dict) -> dict:
    """The same layer written the columns way: every matrix transposed."""
    b = dict(a, x=a["x"].T, o=a["o"].T, layout="columns")
    for key in ("q", "k", "v"):
        b[key] = [w.T for w in a[key]]
    return b


def check(trace, ref: dict, tol: float) -> None:
    for sid, want in ref.items():
        assert sid in trace, sid
        np.testing.assert_allclose(trace.rows(sid), want, rtol=tol, atol=tol, err_msg=sid)


@settings(max_examples=25)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 6), shape=st.sampled_from([(1, 1), (2, 1), (2, 2), (4, 2), (4, 1)]),
       d_k=st.sampled_from([2, 4, 6]), scope=st.sampled_from(["head", "all"]), scaling=st.sampled_from(SCALINGS),
       partial=st.booleans(), cap=st.sampled_from([None, 0.7, 5.0]), alibi=st.booleans(),
       mask=st.sampled_from(["none", "causal", "sliding:2", "streaming:1:2", "streaming:0:1"]),
       layout=st.sampled_from(["rows", "columns"]), style=st.sampled_from(["half", "interleaved", None]))
def test_every_mechanism_matches_numpy(seed, n, shape, d_k, scope, scaling, partial, cap, alibi, mask, layout, style):
    rng = np.random.default_rng(seed)
    heads, groups = shape
    dims = 2 if partial and style and d_k > 2 else None
    a = layer(rng, n, heads, groups, d_k, scope=scope, scaling=scaling if style else None, dims=dims,
              softcap=cap, alibi=alibi, style=style)
    trace = tracer.run(tracer.from_arrays(**(columns(a) if layout == "columns" else a), mask=mask))
    check(trace, reference(a, mask), 1e-9)
    if layout == "columns":   # the exports' orientation: transposes of the rows
        np.testing.assert_array_equal(trace["h0.weights"], trace.rows("h0.weights").T)


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-10), ("float32", 2e-4)])
@pytest.mark.parametrize("engine", ["stages", "fused"])
def test_both_dtypes_and_engines(dtype, tol, engine):
    rng = np.random.default_rng(4)
    a = layer(rng, 9, 4, 2, 4, scope="all", scaling=SCALINGS[3], softcap=3.0, alibi=True)
    trace = tracer.run(tracer.from_arrays(**a, mask="streaming:2:3"), dtype=dtype, engine=engine)
    check(trace, reference(a, "streaming:2:3"), tol)
    assert trace.engine == "stages"   # the fused kernels neither cap nor bias: the stage path runs them


@pytest.fixture(scope="module")
def large():
    """Large enough for the fused path (heads · n² ≥ 2^20): every mechanism the fused kernels run
    (QK-norm, scaled and partial rotary positions, the streaming mask, the output's norm)."""
    rng = np.random.default_rng(8)
    return {scope: layer(rng, 512, 4, 2, 8, scope=scope, scaling=SCALINGS[2], dims=4) for scope in ("head", "all")}


@pytest.mark.parametrize("scope", ["head", "all"])
@pytest.mark.parametrize("lazy", [False, True])
def test_the_fused_path_runs_qk_norm_scaled_rotary_and_the_output_norm(large, scope, lazy):
    a = large[scope]
    sc = tracer.from_arrays(**a, mask="streaming:4:100")
    trace = tracer.run(sc, lazy=lazy)
    assert trace.engine == "fused"
    ref = reference(a, "streaming:4:100")
    for sid in ("h0.q_norm", "h3.q_rot", "h1.weights", "h3.z", "out_norm", "residual"):
        np.testing.assert_allclose(trace.rows(sid), ref[sid], rtol=1e-9, atol=1e-9, err_msg=sid)
    np.testing.assert_allclose(tracer.attention(sc), ref["residual"], rtol=1e-9, atol=1e-9)
    stages = tracer.run(sc, engine="stages", lazy=True)
    np.testing.assert_allclose(stages.rows("kv1.k_norm"), trace.rows("kv1.k_norm"), rtol=1e-12, atol=1e-12)


def test_softcap_and_alibi_at_fused_size_fall_back_to_the_stage_path():
    rng = np.random.default_rng(9)
    a = layer(rng, 512, 4, 4, 4, softcap=2.0, alibi=True, out_norm=False, norm=False, style=None)
    sc = tracer.from_arrays(**a, mask="causal")
    trace = tracer.run(sc, lazy=True)
    assert trace.engine == "stages"
    ref = reference(a)
    for sid in ("h0.capped", "h3.biased", "h2.weights", "residual"):
        np.testing.assert_allclose(trace.rows(sid), ref[sid], rtol=1e-9, atol=1e-9, err_msg=sid)
    np.testing.assert_allclose(tracer.attention(sc), ref["residual"], rtol=1e-9, atol=1e-9)


def test_the_steps_sit_where_the_contract_puts_them():
    rng = np.random.default_rng(1)
    a = layer(rng, 3, 2, 1, 4, scaling=SCALINGS[1], softcap=2.0, alibi=True)
    ids = [s.id for s in tracer.run(tracer.from_arrays(**a, mask="causal")).steps]
    assert ids[:6] == ["x", "freqs", "kv0.k", "kv0.k_norm", "kv0.v", "kv0.k_rot"]
    head = [i for i in ids if i.startswith("h0.")]
    assert head == ["h0.q", "h0.q_norm", "h0.q_rot", "h0.scores", "h0.scaled", "h0.capped", "h0.biased", "h0.masked",
                    "h0.exp", "h0.sums", "h0.weights", "h0.z"]
    assert ids[-4:] == ["concat", "out", "out_norm", "residual"]
    trace = tracer.run(tracer.from_arrays(**a, mask="causal"))
    assert trace.step("h0.scores").inputs == ("h0.q_rot", "kv0.k_rot")
    assert trace.step("h0.masked").inputs == ("h0.biased",)
    assert trace.step("h0.q_rot").inputs == ("h0.q_norm", "freqs")
    assert trace.step("residual").inputs == ("x", "out_norm")
    assert trace.step("freqs").axes == ("pair", "one") and trace.step("freqs").shape == (2, 1)


def test_a_layer_without_rotary_positions_has_no_rotation_steps():
    rng = np.random.default_rng(2)
    a = layer(rng, 3, 2, 2, 4, style=None)
    trace = tracer.run(tracer.from_arrays(**a))
    assert not any(s.kind in ("freqs", "q_rot", "k_rot") for s in trace.steps)
    assert trace.step("h0.scores").inputs == ("h0.q_norm", "h0.k_norm")
