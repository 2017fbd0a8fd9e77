"""The formula modules of attention that chooses its keys (tracer/mechanisms/indexer, compressed,
hyper) against references written apart (loops over heads, slots and keys) and against
transformers' own functions and modules; properties on generated inputs (hypothesis): the choice
is causal, keeps at most k keys a query and the best ones, and with k ≥ n is dense attention."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracer.mechanisms.compressed import attention as att
from tracer.mechanisms.compressed import pool as pooling
from tracer.mechanisms.hyper import connections as hc
from tracer.mechanisms.indexer import rotary, scores, topk
from tracer.models import dsa_block

torch = pytest.importorskip("torch")
v32 = pytest.importorskip("transformers.models.deepseek_v32.modeling_deepseek_v32")
v4 = pytest.importorskip("transformers.models.deepseek_v4.modeling_deepseek_v4")

seeds = st.integers(0, 2**32 - 1)


def _rng(seed):
    return np.random.default_rng(seed)


# ------------------------------------------------------------------ the indexer's scores and choice
@given(seeds, st.integers(1, 7), st.integers(1, 4), st.integers(1, 5))
def test_index_scores_against_loops(seed, n, heads, d):
    rng = _rng(seed)
    q, k, w = rng.normal(size=(n, heads, d)), rng.normal(size=(n, d)), rng.normal(size=(n, heads))
    got = scores.index_scores(q, k, w, 0.5, scores.causal(n))
    for t in range(n):
        for s in range(n):
            want = sum(w[t, h] * max(float(q[t, h] @ k[s]), 0.0) * 0.5 for h in range(heads)) if s <= t else -np.inf
            assert got[t, s] == pytest.approx(want, rel=1e-12, abs=1e-12)


@given(seeds, st.integers(1, 9), st.integers(1, 12), st.booleans())
def test_the_choice_keeps_the_best_k_it_may_see(seed, n, k, ties):
    rng = _rng(seed)
    s = rng.integers(-3, 4, size=(n, n)).astype(float) if ties else rng.normal(size=(n, n))
    s = np.where(scores.causal(n), s, -np.inf)
    keep = topk.select(s, k)
    assert not (keep & ~scores.causal(n)).any(), "a later key kept"
    for t in range(n):
        row, kept = s[t], np.flatnonzero(keep[t])
        assert len(kept) == min(k, t + 1)
        dropped = [j for j in range(t + 1) if j not in kept]
        assert all(row[a] > row[b] or (row[a] == row[b] and a < b) for a in kept for b in dropped), \
            "a better key dropped, or a tie broken towards the later key"
        bar = topk.kth_best(s, k)[t]
        assert bar == (-np.inf if t + 1 <= k else sorted(row[: t + 1])[-k])


def test_reason_names_the_score_and_the_bar():
    s = np.array([[1.0, -np.inf, -np.inf], [2.0, 5.0, -np.inf], [2.0, 7.0, 3.0]])
    keep = topk.select(s, 2)
    assert topk.reason(s, keep, 2, 2, 0) == ("dropped: index score 2 ranks 3 of 3, below the 2nd best, 3; "
                                             "its weight is 0 in every head")
    assert topk.reason(s, keep, 2, 2, 2).startswith("kept: index score 3 ranks 2 of 3, within the top k = 2")
    assert topk.reason(s, keep, 2, 1, 0).startswith("kept: query 1 sees 2 keys, no more than k = 2")
    assert topk.reason(s, keep, 2, 0, 2) == "not a candidate: query 0 may not see key 2"
    with pytest.raises(ValueError, match="k ≥ 1"):
        topk.select(s, 0)
    tie = np.array([[3.0, 3.0, 3.0]])
    keep = topk.select(tie, 2)
    assert topk.reason(tie, keep, 2, 0, 1, what="entry").endswith("broken towards the earlier entries)")
    assert topk.reason(tie[:, :1], keep[:, :1], 2, 0, 0, what="entry").startswith("kept: query 0 sees 1 entry, no")
    assert topk.reason(tie, keep, 2, 0, 0).endswith("(a tie at the bar, broken towards the earlier keys)")
    assert topk.reason(tie, keep, 2, 0, 2) == ("dropped: index score 3 ties with the 2nd best, and earlier keys took "
                                               "the places (ties go to the earlier key); its weight is 0 in every head")


def _latent(rng, heads, n, nope=3, r=2, v=2):
    p = dict(q_nope=rng.normal(size=(heads, n, nope)), k_nope=rng.normal(size=(heads, n, nope)),
             q_pe=rng.normal(size=(heads, n, r)), k_pe=rng.normal(size=(n, r)), v=rng.normal(size=(heads, n, v)),
             c_kv=np.zeros((n, 1)))
    c = SimpleNamespace(mla=dict(nope=nope, rope=r, mscale=1.0))
    return p, c, dict(o=rng.normal(size=(4, heads * v)))


@given(seeds, st.integers(1, 8), st.integers(1, 10))
def test_sparse_attention_is_causal_reads_k_keys_and_is_dense_when_k_covers_the_text(seed, n, k):
    rng = _rng(seed)
    p, c, w = _latent(rng, 2, n)
    s = np.where(scores.causal(n), rng.normal(size=(n, n)), -np.inf)
    got = dsa_block.attend(p, w, c, topk.select(s, k))
    assert (got["weights"][:, ~scores.causal(n)] == 0).all(), "a later key weighs"
    assert ((got["weights"] > 0).sum(-1) <= k).all(), "more than k keys read"
    np.testing.assert_allclose(got["weights"].sum(-1), 1.0, rtol=1e-12)
    if k >= n:
        dense = dsa_block.attend(p, w, c, None)
        np.testing.assert_array_equal(got["weights"], dense["weights"])
        np.testing.assert_array_equal(got["out"], dense["out"])


# ---------------------------------------------------------------------- rotary, against transformers
def _cos_sin(theta, half_layout):
    cos, sin = np.cos(theta), np.sin(theta)
    if half_layout:   # Llama-style tables: cat(freqs, freqs)
        cos, sin = np.concatenate([cos, cos], -1), np.concatenate([sin, sin], -1)
    return torch.tensor(cos)[None], torch.tensor(sin)[None]


@given(seeds, st.integers(1, 6), st.sampled_from([2, 4, 6]), st.integers(0, 3))
def test_turns_against_transformers(seed, n, r, extra):
    rng = _rng(seed)
    theta = np.outer(np.arange(n), rng.uniform(0.1, 2.0, r // 2))
    x = rng.normal(size=(2, n, r + extra))
    t = torch.tensor(x)[None]
    # V3.2's indexer: the first r in half pairs
    cos, sin = _cos_sin(theta, True)
    want, _ = v32.apply_rotary_pos_emb(t[..., :r], t[..., :r], cos, sin)
    np.testing.assert_allclose(rotary.turn(x, theta, "half", "first")[..., :r], want[0].numpy(), atol=1e-12)
    # interleaved pairs (V3.2's latent attention, GLM's indexer): transformers writes evens then odds
    cos, sin = _cos_sin(theta, True)
    want, _ = v32.apply_rotary_pos_emb_interleave(t[..., :r], t[..., :r], cos, sin)
    mine = rotary.turn(x, theta, "interleaved", "first")[..., :r]
    np.testing.assert_allclose(np.concatenate([mine[..., 0::2], mine[..., 1::2]], -1), want[0].numpy(), atol=1e-12)
    # V4: the last r, interleaved, in place (transformers turns them in float32); turned back with −θ
    cos, sin = torch.tensor(np.cos(theta))[None], torch.tensor(np.sin(theta))[None]
    want = v4.apply_rotary_pos_emb(t.transpose(1, 2), cos, sin, unsqueeze_dim=2).transpose(1, 2)
    np.testing.assert_allclose(rotary.turn(x, theta, "interleaved", "last"), want[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(rotary.turn(rotary.turn(x, theta, "interleaved", "last"), -theta, "interleaved",
                                           "last"), x, atol=1e-12)


# ------------------------------------------------------------------ DeepSeek V4's pool and attention
@given(seeds, st.integers(0, 13), st.sampled_from([1, 2, 4]), st.integers(1, 3), st.booleans())
def test_pool_against_loops(seed, n, m, d, overlap):
    rng = _rng(seed)
    width = 2 * d if overlap else d
    c, z, b = rng.normal(size=(n, width)), rng.normal(size=(n, width)), rng.normal(size=(m, width))
    got, weights = pooling.pool(c, z, b, m, overlap)
    src = pooling.sources(n // m, m, overlap)
    assert got.shape == (n // m, d) and weights.shape == (n // m, pooling.slots(m, overlap), d)
    for e in range(n // m):
        for f in range(d):
            terms = []   # (logit, value) of each slot with a token behind it
            for s, t in enumerate(src[e]):
                if t < 0:
                    continue
                col = f if overlap and s < m else (f + d if overlap else f)
                terms.append((z[t, col] + b[t % m, col], c[t, col]))
            top = max(lg for lg, _ in terms)
            total = sum(np.exp(lg - top) for lg, _ in terms)
            assert got[e, f] == pytest.approx(sum(np.exp(lg - top) * v for lg, v in terms) / total, rel=1e-10)
    vis = pooling.visible(n, n // m, m)
    assert all(vis[t, e] == ((e + 1) * m - 1 <= t) for t in range(n) for e in range(n // m))


@given(seeds, st.integers(1, 6), st.integers(0, 3), st.integers(1, 3))
def test_sinks_against_transformers(seed, n, entries, heads):
    rng = _rng(seed)
    q, kv = rng.normal(size=(1, heads, n, 4)), rng.normal(size=(1, 1, n + entries, 4))
    allowed = np.concatenate([att.sliding(n, 2), rng.random((n, entries)) < 0.5], axis=1)
    sinks = rng.normal(size=heads)
    module = SimpleNamespace(num_key_value_groups=heads, sinks=torch.tensor(sinks), training=False)
    mask = torch.tensor(np.where(allowed, 0.0, -np.inf))[None, None]
    _, want = v4.eager_attention_forward(module, torch.tensor(q), torch.tensor(kv), torch.tensor(kv), mask, 0.5)
    got, sink = att.weights_with_sinks(np.einsum("hid,jd->hij", q[0], kv[0, 0]) * 0.5, allowed, sinks)
    np.testing.assert_allclose(got, want[0].numpy(), atol=1e-12)
    np.testing.assert_allclose(got.sum(-1) + sink, 1.0, rtol=1e-12)


@given(seeds, st.sampled_from([(4, 2), (4, 4), (6, 3), (2, 1)]), st.integers(1, 3))
def test_grouped_output_against_transformers(seed, heads_groups, d_g):
    heads, groups = heads_groups
    rng = _rng(seed)
    D, n, model = 3, 5, 7
    z = rng.normal(size=(n, heads * D))
    lin = v4.DeepseekV4GroupedLinear(heads * D // groups, groups * d_g, groups).double()
    w_b = rng.normal(size=(model, groups * d_g))
    with torch.no_grad():
        lin.weight.copy_(torch.tensor(rng.normal(size=(groups * d_g, heads * D // groups))))
        per = lin(torch.tensor(z).reshape(1, n, groups, -1)).flatten(2)[0].numpy()
    got_per, got = att.grouped_output(z, lin.weight.detach().numpy(), w_b, groups)
    np.testing.assert_allclose(got_per, per, atol=1e-12)
    np.testing.assert_allclose(got, per @ w_b.T, atol=1e-12)


@given(seeds, st.integers(1, 4), st.integers(1, 5))
def test_hyper_connections_against_transformers(seed, streams, iters):
    import transformers
    rng = _rng(seed)
    d, n = 6, 3
    cfg = transformers.DeepseekV4Config(hidden_size=d, hc_mult=streams, hc_sinkhorn_iters=iters, rms_norm_eps=1e-6,
                                        hc_eps=1e-6, num_hidden_layers=1)
    module = v4.DeepseekV4HyperConnection(cfg).double()
    fn, base, scale = rng.normal(size=module.fn.shape), rng.normal(size=module.base.shape), rng.uniform(0.5, 2, 3)
    with torch.no_grad():
        for p, value in ((module.fn, fn), (module.base, base), (module.scale, scale)):
            p.copy_(torch.tensor(value))
    x = rng.normal(size=(n, streams, d))
    with torch.no_grad():
        post, comb, collapsed = (a[0].numpy() for a in module(torch.tensor(x)[None]))
    pre_m, post_m, comb_m = hc.mixes(x, fn, base, scale, iters, 1e-6, 1e-6)
    close = dict(rtol=1e-5, atol=1e-5)                              # its norm computes in float32
    np.testing.assert_allclose(post_m, post, **close)
    np.testing.assert_allclose(comb_m, comb, **close)
    np.testing.assert_allclose(hc.collapse(x, pre_m), collapsed, **close)
    out = rng.normal(size=(n, d))
    want = post[..., None] * out[:, None, :] + np.einsum("tkj,tjd->tkd", np.swapaxes(comb, -1, -2), x)
    np.testing.assert_allclose(hc.expand(x, out, post_m, comb_m), want, **close)


def test_the_story_of_an_index_score():
    q, k, w = np.array([[[1.0], [-1.0]]]), np.array([[2.0]]), np.array([[0.5, 3.0]])
    assert scores.story(q, k, w, 0.5, 0, 0, lambda v: f"{v:g}") == (
        "= 0.5·ReLU(2) + 3·ReLU(-2) = 1 + 0 = 1, × 0.5 = 0.5   (index head 1 disagrees: cut to 0, "
        "not a vote against)")
    assert scores.index_scores(q, k, w, 0.5, scores.causal(1))[0, 0] == 0.5


def _v4_layer(rng, n, m, top):
    """A DeepSeek V4 compressed-sparse layer of random small weights (every tensor its shape)."""
    from tracer.models import deepseek_v4_block as v4b
    c = SimpleNamespace(d_model=6, heads=2, head_dim=4, rope_dims=2, q_rank=3, groups=2, group_rank=2, window=3,
                        eps=1e-6, kinds=[v4b.SPARSE], rates={v4b.SPARSE: m}, index=dict(heads=2, dim=4, topk=top),
                        rope={"main": {"base": 50.0}, "compress": {"base": 70.0}})
    w = {name: rng.normal(size=shape) * 2 for name, shape in v4b._want(c, v4b.SPARSE).items()}
    x = rng.normal(size=(n, 6))
    return v4b.layer(x, x, w, c, 0), c, w


@given(seeds, st.integers(1, 14), st.sampled_from([1, 2, 4]), st.integers(1, 5))
def test_v4_sparse_layer_reads_its_window_and_at_most_k_complete_entries(seed, n, m, top):
    p, c, w = _v4_layer(_rng(seed), n, m, top)
    entries = n // m
    weights = p["weights"]                                           # heads × query × (tokens, entries)
    tokens, pooled = weights[..., :n], weights[..., n:]
    assert (tokens[:, ~att.sliding(n, c.window)] == 0).all(), "a token outside the window weighs"
    assert (pooled[:, ~pooling.visible(n, entries, m)] == 0).all(), "an entry not yet complete weighs"
    assert ((pooled > 0).sum(-1) <= top).all(), "more than k entries read"
    if top >= entries:   # k covers the pool: every complete entry, as the heavily compressed kind reads them
        allowed = np.concatenate([att.sliding(n, c.window), pooling.visible(n, entries, m)], axis=1)
        keys = np.concatenate([p["kv"], p["pool.k"]])
        dense, _ = att.weights_with_sinks(np.einsum("hid,jd->hij", p["q"], keys) * 0.5, allowed, w["attn_sink"])
        np.testing.assert_allclose(weights, dense, rtol=1e-12, atol=1e-15)
