"""DeepSeek V4's compressed attention as the engine traces it (mechanisms/compressed), on a layer
written here (tests/v4_layer.py): every head's weights over the tokens then the entries with the
sink, z turned back and the grouped output against NumPy written in this file, in both layouts;
the section's refusals in one line, from from_arrays and from a scenario file on the command line.
The checkpoint's layers against transformers: tests/test_v4_traced.py."""
from __future__ import annotations

import numpy as np
import pytest

import tracer
import v4_layer
from tui.cli import main

RNG = np.random.default_rng(11)
X = RNG.normal(size=(5, 6))


@pytest.fixture(scope="module")
def layer():
    keys = v4_layer.arrays(n=5, heads=2, d=4, seed=4)
    return keys, tracer.from_arrays(X, **keys)


def reference(keys: dict) -> dict:
    """weights (heads × n × (n + E)), sink (heads × n), z (heads × n × D), o_groups, out, written here."""
    c, allowed, sinks = keys["compressed"], keys["mask"], keys["sinks"]
    def turn(a, angle=np.arange(5) * 0.5):   # the last pair (features 2 and 3) turned by p·0.5
        out = a.copy()
        out[..., 2] = a[..., 2] * np.cos(angle) - a[..., 3] * np.sin(angle)
        out[..., 3] = a[..., 3] * np.cos(angle) + a[..., 2] * np.sin(angle)
        return out
    rms = lambda a: a / np.sqrt((a ** 2).mean(axis=-1, keepdims=True) + 1e-6)  # noqa: E731
    tokens = turn(rms(X @ c["w_kv"]) * c["kv_gain"])
    p = c["pool"]   # entry e of m = 2: series a (C's first 4 columns) of tokens 2e − 2, 2e − 1, b of 2e, 2e + 1
    C, Z, entries = X @ p["w_c"], X @ p["w_z"], []
    for e in range(2):
        slots = [(t, slice(0, 4)) for t in (2 * e - 2, 2 * e - 1) if t >= 0]
        slots += [(t, slice(4, 8)) for t in (2 * e, 2 * e + 1)]
        logits = np.array([Z[t, cols] + p["bias"][t % 2, cols] for t, cols in slots])
        weights = np.exp(logits - logits.max(axis=0))
        weights /= weights.sum(axis=0)                              # a softmax over the slots, feature by feature
        entries.append(sum(weights[s] * C[t, cols] for s, (t, cols) in enumerate(slots)))
    pooled = turn(rms(np.array(entries)) * p["gain"], np.arange(2) * 2 * 0.5)   # turned at 2e
    kv = np.concatenate([tokens, pooled])
    c_q = rms(X @ c["w_qa"]) * c["q_gain"]
    turned = turn(rms(np.einsum("tr,hrd->htd", c_q, c["w_qb"])))     # queries: normed without a gain
    s = np.einsum("hid,jd->hij", turned, kv) / 2.0                  # ÷ √D, D = 4
    s = np.where(allowed, s, -np.inf)
    top = np.maximum(s.max(axis=2), sinks[:, None])
    powers, sink = np.exp(s - top[..., None]), np.exp(sinks[:, None] - top)
    total = powers.sum(axis=2) + sink
    w = powers / total[..., None]
    z_rot = w @ kv
    angle = -c["theta"][:, 0]                                       # the last pair, features 2 and 3
    z = z_rot.copy()
    z[..., 2] = z_rot[..., 2] * np.cos(angle) - z_rot[..., 3] * np.sin(angle)
    z[..., 3] = z_rot[..., 3] * np.cos(angle) + z_rot[..., 2] * np.sin(angle)
    concat = np.concatenate(list(z), axis=1)                       # token × heads·D
    w_o = np.zeros((8, 6))                                          # the grouped W_a as one block-diagonal matrix
    for g in range(2):
        w_o[4 * g:4 * g + 4, 3 * g:3 * g + 3] = c["w_a"][3 * g:3 * g + 3].T
    groups = concat @ w_o
    out = groups @ c["w_b"].T
    ix = c["index"]   # the indexer: 2 heads of 3; entry e is complete for token t once 2·(e + 1) ≤ t + 1
    votes = np.array([[[max(ix["q"][t, 3 * h:3 * h + 3] @ ix["k"][e], 0.0) for e in range(2)] for h in range(2)]
                      for t in range(5)])
    index = np.einsum("th,the->te", ix["w"], votes) * ix["scale"]
    index[[[2 * (e + 1) > t + 1 for e in range(2)] for t in range(5)]] = -np.inf
    x = c["x_streams"].reshape(5, 2, 6)   # X'_k = post_k·out + Σ_j comb_jk·X_j, token by token
    after = np.stack([c["post"][t][:, None] * out[t][None, :] + c["comb"][t].T @ x[t] for t in range(5)])
    return dict(pool=pooled, index=index, q_rot=turned, k=kv, weights=w, sink=sink / total, z_rot=z_rot, z=z,
                o_groups=groups, out=out, streams_after=after.reshape(10, 6))


@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_the_heads_and_the_grouped_output_against_numpy(layer, layout):
    keys, sc = layer
    tr, want = tracer.run(sc, layout=layout), reference(keys)
    rows = (lambda a: a.T) if layout == "columns" else (lambda a: a)  # noqa: E731
    for h in range(2):
        np.testing.assert_allclose(rows(tr[f"h{h}.q_rot"]), want["q_rot"][h], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(rows(tr[f"h{h}.weights"]), want["weights"][h], rtol=1e-12, atol=1e-15)
        assert ((rows(tr[f"h{h}.weights"]) == 0) == ~keys["mask"]).all()
        np.testing.assert_allclose(rows(tr[f"h{h}.sink"])[:, 0], want["sink"][h], rtol=1e-12)
        np.testing.assert_allclose(rows(tr[f"h{h}.z_rot"]), want["z_rot"][h], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(rows(tr[f"h{h}.z"]), want["z"][h], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(rows(tr["o_groups"]), want["o_groups"], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(rows(tr["out"]), want["out"], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(rows(tr["streams_after"]), want["streams_after"], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(rows(tr["idx.scores"]), want["index"], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(rows(tr["pool.k"]), want["pool"], rtol=1e-12, atol=1e-15)
    assert tr.step("kv0.k").shape == ((4, 7) if layout == "columns" else (7, 4))   # 5 tokens, then 2 entries
    np.testing.assert_allclose(rows(tr["kv0.k"]), want["k"], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("change, message", [
    (dict(w_qb=None), "compressed.w_qb: expected an array heads × q_rank × D, got nothing"),
    (dict(w_qa=np.ones((6, 2))), "compressed.w_qa: expected an array 6 × 3, got an array 6 × 2"),
    (dict(eps=2.0), "compressed.eps: expected a number between 0 and 1, got 2"),
    (dict(kind="sliding"), 'compressed.kind: expected "sliding_attention", "compressed_sparse_attention" or '
                           '"heavily_compressed_attention", got a string'),
    (dict(pre=np.ones((4, 2))), "compressed.pre: expected an array 5 × 2, got an array 4 × 2"),
    (dict(groups=3), "compressed.groups: expected a number of groups that divides 2 heads"),
    (dict(index=None), "compressed.index.w: expected an array 5 × index heads, got nothing"),
    (dict(pool=None), "compressed.pool: expected a table with w_c, w_z, bias, gain and theta"),
    (dict(pool=dict(w_c=np.ones((6, 8)))), "compressed.pool.w_z: expected an array 6 × 8, got nothing"),
    (dict(w_qb=[[[1.0], [1.0, 2.0]]]), "compressed.w_qb: expected an array heads × q_rank × D, got a list"),
    (dict(stride=2), "compressed.stride: unknown field"),
])
def test_a_bad_section_is_refused_in_one_line(layer, change, message):
    keys, _ = layer
    bad = dict(keys, compressed={**keys["compressed"], **change})
    with pytest.raises(tracer.ScenarioError) as err:
        tracer.from_arrays(X, **bad)
    assert str(err.value).startswith(message) and "\n" not in str(err.value), str(err.value)


def test_a_mask_other_than_the_layers_own_is_refused(layer):
    """The mask follows from the window, the complete entries and the indexer's choice (the masked steps
    name these reasons): the written layer's own is accepted, absent is the same, another is refused."""
    keys, sc = layer
    assert np.array_equal(tracer.from_arrays(X, **dict(keys, mask=None)).mask, sc.mask)
    other = keys["mask"].copy()
    other[4, 0] = True   # token 0 is outside query 4's window of 2
    for mask in (other, "causal"):
        with pytest.raises(tracer.ScenarioError, match=r"^mask: expected none, or the layer's own \(5 × 7: the last"):
            tracer.from_arrays(X, **dict(keys, mask=mask))


def test_the_command_line_names_the_file_and_the_field(tmp_path, capsys):
    path = tmp_path / "v4.toml"
    path.write_text('x = [[1.0, 0.0], [0.0, 1.0]]\n[compressed]\nkind = "sliding_attention"\nwindow = 2\n',
                    encoding="utf-8")
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"attnsim: error: {path}: compressed.w_qb: expected an array heads × q_rank × D, got nothing\n"
