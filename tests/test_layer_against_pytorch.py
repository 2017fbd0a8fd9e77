"""Today's attention layer (CONTRACT §8) against PyTorch's scaled_dot_product_attention and a
NumPy RoPE written here: biases, grouped- and multi-query heads, rotary positions (both styles),
cross-attention, the causal variants and sliding windows, keys as values, in both layouts."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tracer

torch = pytest.importorskip("torch")
F = torch.nn.functional


def rope_numpy(a, style, base, offset=0):
    """Rotary positions written out plainly: pair i of position p turned by p·base^(−2i/d)."""
    n, d = a.shape
    out = a.copy()
    for t in range(n):
        for i in range(d // 2):
            j, k = (i, i + d // 2) if style == "half" else (2 * i, 2 * i + 1)
            angle = (offset + t) * base ** (-2 * i / d)
            out[t, j] = a[t, j] * np.cos(angle) - a[t, k] * np.sin(angle)
            out[t, k] = a[t, j] * np.sin(angle) + a[t, k] * np.cos(angle)
    return out


def rotate_half_hf(a, base, offset=0):
    """The Hugging Face convention: q·cos + rotate_half(q)·sin with cos/sin repeated over halves."""
    n, d = a.shape
    inv = base ** (-np.arange(0, d, 2) / d)
    angle = np.outer(offset + np.arange(n), inv)
    emb = np.concatenate([angle, angle], axis=1)
    half = np.concatenate([-a[:, d // 2:], a[:, : d // 2]], axis=1)
    return a * np.cos(emb) + half * np.sin(emb)


def layer(rng, n=5, m=None, d=8, heads=4, groups=2, dk=4, biases=True, rope=None, cross=False):
    m = n if m is None else m
    dc = 6 if cross else d
    args = dict(x=rng.normal(size=(n, d)), q=[rng.normal(size=(d, dk)) for _ in range(heads)],
                k=[rng.normal(size=(dc, dk)) for _ in range(groups)], v=[rng.normal(size=(dc, dk)) for _ in range(groups)],
                o=rng.normal(size=(heads * dk, d)))
    if biases:
        args.update(bq=[rng.normal(size=dk) for _ in range(heads)], bk=[rng.normal(size=dk) for _ in range(groups)],
                    bv=rng.normal(size=dk), bo=rng.normal(size=d))
    if rope:
        args["rope"] = rope
    if cross:
        args.update(context=rng.normal(size=(m, dc)), context_tokens=[f"c{i}" for i in range(m)])
    return args


def sdpa_reference(args, mask=None, is_causal=False, scale=None):
    """PyTorch's answer, from the arrays alone (rows layout), heads in the enable_gqa order."""
    x, heads = args["x"], len(args["q"])
    src = args.get("context", x)
    t = lambda a: torch.tensor(np.asarray(a), dtype=torch.float64)  # noqa: E731
    bias = lambda key, i: args[key][i] if isinstance(args.get(key), list) else args.get(key, 0)  # noqa: E731
    q = [x @ w + (bias("bq", h) if "bq" in args else 0) for h, w in enumerate(args["q"])]
    k = [src @ w + (bias("bk", g) if "bk" in args else 0) for g, w in enumerate(args["k"])]
    v = [src @ w + (bias("bv", g) if "bv" in args else 0) for g, w in enumerate(args["v"])]
    if "rope" in args:
        r = args["rope"]
        q = [rope_numpy(a, r["style"], r["base"], r.get("offset", 0)) for a in q]
        k = [rope_numpy(a, r["style"], r["base"], r.get("offset", 0)) for a in k]
    Q, K, V = (t(np.stack(a))[None] for a in (q, k, v))
    z = F.scaled_dot_product_attention(Q, K, V, attn_mask=mask, is_causal=is_causal, scale=scale,
                                       enable_gqa=len(args["k"]) < heads)[0]
    concat = torch.cat(list(z), dim=1).numpy()
    return z.numpy(), concat @ args["o"] + args.get("bo", 0)


@pytest.mark.parametrize("groups", [4, 2, 1])
@pytest.mark.parametrize("style", [None, "half", "interleaved"])
@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_grouped_biased_rotated_causal_layer_matches_sdpa(groups, style, layout):
    rng = np.random.default_rng(groups * 7 + len(style or ""))
    args = layer(rng, groups=groups, rope=dict(base=50.0, style=style, offset=3) if style else None)
    z, out = sdpa_reference(args, is_causal=True)
    file_args = dict(args)
    if layout == "columns":   # the same layer written the columns way: every matrix transposed
        for key in ("q", "k", "v"):
            file_args[key] = [w.T for w in args[key]]
        file_args.update(x=args["x"].T, o=args["o"].T)
    trace = tracer.run(tracer.from_arrays(**file_args, layout=layout, mask="causal"))
    for h in range(4):
        np.testing.assert_allclose(trace.rows(f"h{h}.z"), z[h], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(trace.rows("out"), out, rtol=1e-10, atol=1e-12)
    grouped = groups < 4
    assert (f"kv0.k" in trace) == grouped and ("h0.k" in trace) == (not grouped)
    assert ("h0.q_rot" in trace) == bool(style)


def test_rope_styles_match_numpy_and_the_hugging_face_rotate_half():
    rng = np.random.default_rng(3)
    args = layer(rng, heads=1, groups=1, biases=False, rope=dict(base=10000.0, style="half", offset=2))
    trace = tracer.run(tracer.from_arrays(**args))
    q = trace.rows("h0.q")
    np.testing.assert_allclose(trace.rows("h0.q_rot"), rope_numpy(q, "half", 10000.0, 2), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(trace.rows("h0.q_rot"), rotate_half_hf(q, 10000.0, 2), rtol=1e-12, atol=1e-14)
    args["rope"] = dict(base=10000.0, style="interleaved")
    trace = tracer.run(tracer.from_arrays(**args))
    np.testing.assert_allclose(trace.rows("h0.k_rot"), rope_numpy(trace.rows("h0.k"), "interleaved", 10000.0),
                               rtol=1e-12, atol=1e-14)


def test_rope_explain_shows_the_pair_the_angle_cos_and_sin():
    trace = tracer.run("rope")
    text = trace.explain("h0.q_rot", 3, 0)
    assert "cos 3θ₀" in text and "sin 3θ₀" in text and "position 3" in text


def test_two_equal_tokens_score_depends_only_on_their_distance():
    x = np.tile(np.array([[1.0, 2.0, -1.0, 0.5]]), (6, 1))
    w = np.eye(4)
    trace = tracer.run(tracer.from_arrays(x, w, w, w, rope=dict(base=10.0, style="half")))
    s = trace.rows("h0.scores")
    for gap in range(6):
        diagonal = np.diagonal(s, -gap)
        np.testing.assert_allclose(diagonal, diagonal[0], rtol=1e-12)


@pytest.mark.parametrize("mask", ["none", "causal", "causal_lower_right", "sliding:2"])
@pytest.mark.parametrize("n,m", [(3, 5), (5, 3), (4, 4)])
def test_cross_attention_and_masks_match_sdpa(mask, n, m):
    rng = np.random.default_rng(n * 10 + m)
    args = layer(rng, n=n, m=m, cross=True, groups=4)
    i, j = np.arange(n)[:, None], np.arange(m)[None, :]
    allowed = {"none": np.ones((n, m), bool), "causal": j <= i, "causal_lower_right": j <= i + (m - n),
               "sliding:2": (j <= i) & (j > i - 2)}[mask]
    if not allowed.any(axis=1).all():
        return   # a query with no key: its zeros are checked in the numeric edge tests
    z, out = sdpa_reference(args, mask=torch.tensor(allowed))
    trace = tracer.run(tracer.from_arrays(**args, mask=mask))
    assert trace.step("h0.scores").shape == (n, m)
    for h in range(4):
        np.testing.assert_allclose(trace.rows(f"h{h}.z"), z[h], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(trace.rows("out"), out, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n,m", [(3, 5), (5, 3)])
def test_torch_causal_variants_agree_with_our_words(n, m):
    bias = pytest.importorskip("torch.nn.attention.bias")
    args = layer(np.random.default_rng(1), n=n, m=m, cross=True, groups=4, biases=False)
    for word, theirs in (("causal", bias.causal_upper_left), ("causal_lower_right", bias.causal_lower_right)):
        allowed = theirs(n, m)._materialize().numpy()
        with __import__("warnings").catch_warnings():
            __import__("warnings").simplefilter("ignore", tracer.AttentionWarning)
            trace = tracer.run(tracer.from_arrays(**args, mask=word))
        np.testing.assert_array_equal(np.isfinite(trace.rows("h0.masked")), allowed)


def test_keys_as_values():
    trace = tracer.run("keys_as_values")
    np.testing.assert_array_equal(trace["h0.v"], trace["h0.k"])
    assert "values are the keys" in trace.explain("h0.v", 0, 0)


def test_a_bias_worked_by_hand():
    """x = [1, 2], W_Q = [[1, 0], [0, 1]], b_Q = [10, −1]: q = [11, 1]."""
    trace = tracer.run(tracer.from_arrays([[1.0, 2.0]], [[1.0, 0.0], [0.0, 1.0]], np.eye(2), np.eye(2), bq=[10.0, -1.0]))
    assert trace.rows("h0.q").tolist() == [[11.0, 1.0]]
    assert "+ 10 = 11" in trace.explain("h0.q", 0, 0)
    assert "+ b_Q" in trace.step("h0.q").formula


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.sampled_from([(4, 4), (4, 2), (4, 1), (2, 1)]),
       st.sampled_from(["none", "causal", "causal_lower_right", "sliding:1", "sliding:3"]), st.integers(0, 2**31))
def test_generated_layers_match_sdpa(n, m, hg, mask, seed):
    heads, groups = hg
    rng = np.random.default_rng(seed)
    args = layer(rng, n=n, m=m, heads=heads, groups=groups, cross=n != m, rope=dict(base=30.0, style="half"))
    i, j = np.arange(n)[:, None], np.arange(m)[None, :]
    allowed = {"none": np.ones((n, m), bool), "causal": j <= i, "causal_lower_right": j <= i + (m - n),
               "sliding:1": j == i, "sliding:3": (j <= i) & (j > i - 3)}[mask]
    if not allowed.any(axis=1).all():
        return
    z, out = sdpa_reference(args, mask=torch.tensor(allowed))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tracer.AttentionWarning)
        trace = tracer.run(tracer.from_arrays(**args, mask=mask))
    np.testing.assert_allclose(trace.rows("out"), out, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("change,field", [
    (dict(rope=dict(base=10.0)), "rope"),                          # odd d_k: 3
    (dict(k=[np.ones((2, 3))] * 3), "weights.k"),                  # 4 heads, 3 groups
    (dict(context=np.ones((4, 5))), "weights.k"),                  # context 5 wide, W_K reads 2
    (dict(mask="sliding:0"), "mask"),
    (dict(context=np.ones((4, 2)), context_tokens=["a", "b"]), "context_tokens"),
    (dict(mask=np.ones((3, 4))), "mask"),                          # 3 × 3 expected
])
def test_bad_layers_name_the_field(change, field):
    args = dict(x=np.ones((3, 2)), q=[np.ones((2, 3))] * 4, k=[np.ones((2, 3))] * 4, v=[np.ones((2, 3))] * 4)
    args.update(change)
    with pytest.raises(tracer.ScenarioError) as info:
        tracer.from_arrays(**args)
    assert info.value.field.startswith(field), str(info.value)


@pytest.mark.parametrize("name", ["biases", "keys_as_values", "gqa", "mqa", "rope", "cross_attention", "sliding_window"])
def test_builtins_of_today_match_sdpa(name):
    sc = tracer.load_scenario(name)
    n, m = sc.n, sc.m
    args = dict(x=sc.x, q=list(sc.w_q), k=list(sc.w_k), v=list(sc.w_v),
                o=sc.w_o if sc.w_o is not None else np.eye(sc.heads * sc.d_v))
    for key, b in (("bq", sc.b_q), ("bk", sc.b_k), ("bv", sc.b_v)):
        if b is not None:
            args[key] = list(b)
    if sc.b_o is not None:
        args["bo"] = sc.b_o[0]
    if sc.rope is not None:
        args["rope"] = sc.rope
    if sc.context is not None:
        args["context"] = sc.context
    i, j = np.arange(n)[:, None], np.arange(m)[None, :]
    width = int(sc.mask.partition(":")[2]) if sc.mask.startswith("sliding:") else m
    allowed = {"none": np.ones((n, m), bool), "causal": j <= i}.get(sc.mask, (j <= i) & (j > i - width))
    z, out = sdpa_reference(args, mask=torch.tensor(allowed))
    trace = tracer.run(sc, "exact")
    for h in range(sc.heads):
        np.testing.assert_allclose(trace.rows(f"h{h}.z"), z[h], rtol=1e-10, atol=1e-12)
    if sc.w_o is not None:
        np.testing.assert_allclose(trace.rows("out"), out, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("style", [None, "half", "interleaved"])
def test_the_fused_kernels_match_sdpa_on_grouped_rotated_biased_layers(style, lazy):
    """The large-scenario path (whole groups handed to the fused kernels, head by head when lazy)."""
    rng = np.random.default_rng(11)
    args = layer(rng, n=130, heads=8, groups=2, dk=4, rope=dict(base=40.0, style=style) if style else None)
    z, out = sdpa_reference(args, is_causal=True)
    trace = tracer.run(tracer.from_arrays(**args, mask="causal"), engine="fused", lazy=lazy)
    for h in (0, 3, 7):
        np.testing.assert_allclose(trace.rows(f"h{h}.z"), z[h], rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(trace.rows("out"), out, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(tracer.attention(tracer.from_arrays(**args, mask="causal"), engine="fused"), out,
                               rtol=1e-9, atol=1e-11)
