"""The block forwards of DeepSeek V3.2, GLM-5 and DeepSeek V4 against transformers' eager forward
on tiny float64 checkpoints (tests/tiny_sparse.py): for every layer, the stream entering it (V4:
its hyper-connection streams and the x they collapse into), every head's weights with exact zeros
where a key was not chosen, the attention's output, and the indexer's choice, scores and inputs;
the index scores also against a reference written here (loops over heads, its own rotation)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import tiny_sparse as ts  # noqa: E402
from tracer.mechanisms.indexer import topk  # noqa: E402
from tracer.models import dsa_block, deepseek_v4_stream  # noqa: E402

FORWARD = {"deepseek_v32": dsa_block.run, "glm_moe_dsa": dsa_block.run, "deepseek_v4": deepseek_v4_stream.run}


@pytest.fixture(scope="module", params=sorted(ts.CONFIGS))
def family(request, tmp_path_factory):
    """(family, model, transformers' layers, ours) for one tiny checkpoint, built once."""
    name = request.param
    folder = tmp_path_factory.mktemp(name)
    model = ts.build(name, folder, seed=3)
    ids = ts.ids_of(folder)
    theirs = ts.run(model, ids)
    return name, model, theirs, FORWARD[name](folder, ids, model.config.num_hidden_layers - 1)


def test_every_layer_against_transformers(family):
    name, _, theirs, ours = family
    for i, (want, got) in enumerate(zip(theirs, ours)):
        if name == "deepseek_v4":
            ts.close(got["streams"], want["x"], f"streams entering layer {i}")
            ts.close(got["x"], want["collapsed"], f"x (the collapsed streams) of layer {i}")
        else:
            ts.close(got["x"], want["x"], f"x entering layer {i}")
        ts.close(got["norm_in"], want["attn_in"], f"the attention's input at layer {i}")
        assert want["weights"].std() > 0.05, "heads too uniform to prove anything"
        ts.close(got["weights"], want["weights"], f"weights of layer {i}")
        ts.close(got["out"], want["out"], f"attention output of layer {i}")


def _allowed(name: str, got: dict) -> np.ndarray:
    if name == "deepseek_v4":
        return got["allowed"]
    n = len(got["x"])
    return np.tri(n, dtype=bool) & got["idx.selected"]


def test_exact_zeros_where_a_key_was_not_chosen(family):
    """transformers' weights are exactly 0 where ours are not allowed, and only there."""
    name, _, theirs, ours = family
    for i, (want, got) in enumerate(zip(theirs, ours)):
        allowed = _allowed(name, got)
        assert ((want["weights"] == 0) == ~allowed[None]).all(), f"layer {i}: zeros in other places"
        assert ((got["weights"] == 0) == ~allowed[None]).all(), f"layer {i}: our zeros in other places"


def test_the_indexer_chooses_what_transformers_chooses(family):
    """The same keys (V4: entries) for every query; and the choice matters: some keys a query
    could see are dropped, and no tie at the k-th place makes the choice arbitrary."""
    name, model, theirs, ours = family
    k, dropped = model.config.index_topk, 0
    for i, (want, got) in enumerate(zip(theirs, ours)):
        if "chosen" not in want:
            continue
        ours_sets = [set(np.flatnonzero(row)) for row in got["idx.selected"]]
        seen = [set(range(t + 1)) for t in range(len(ours_sets))] if name != "deepseek_v4" else \
            [set(np.flatnonzero(row)) for row in np.isfinite(got.get("idx.scores", np.zeros((len(ours_sets), 0))))]
        assert ours_sets == [c & s for c, s in zip(want["chosen"], seen)], f"layer {i}: another choice"
        assert all(len(s) <= k for s in ours_sets)
        if "idx.scores" in got:
            assert not topk.ties(got["idx.scores"], k).any(), f"layer {i}: a tie at the k-th place"
            dropped += sum(len(s) - len(c) for s, c in zip(seen, ours_sets))
    assert dropped > 0, "the text is too short for the choice to matter"


def _turn(m: np.ndarray, inv_freq: np.ndarray, factor: float, style: str, where: str) -> np.ndarray:
    """Rotary positions written apart: pairs as complex numbers times e^(i·p·θ), × factor."""
    n, d = m.shape[-2:]
    r = 2 * len(inv_freq)
    cols = np.arange(r) if where == "first" else np.arange(d - r, d)
    a, b = (cols[: r // 2], cols[r // 2:]) if style == "half" else (cols[0::2], cols[1::2])
    z = (m[..., a] + 1j * m[..., b]) * np.exp(1j * np.outer(np.arange(n), inv_freq)) * factor
    out = m.copy()
    out[..., a], out[..., b] = z.real, z.imag
    return out


def test_index_scores_against_a_reference(family):
    """DeepSeek V3.2 / GLM: Σ_h w_h·ReLU(q_h·k)/√d_I from the indexer's own projections (caught in
    transformers), turned here; V4: transformers' scorer's own output and inputs."""
    name, model, theirs, ours = family
    cfg = model.config
    H, d = cfg.index_n_heads, cfg.index_head_dim
    for i, (want, got) in enumerate(zip(theirs, ours)):
        if "idx.scores" not in got:
            continue
        if name == "deepseek_v4":
            finite = np.isfinite(got["idx.scores"])
            ts.close(np.where(finite, got["idx.scores"], 0), np.where(finite, want["index_scores"], 0), "index scores")
            ts.close(got["idx.q"], want["index_q"].reshape(len(finite), -1), "idx.q")
            ts.close(got["idx.k"], want["index_k"], "idx.k")
            continue
        rot = model.model.rotary_emb
        inv, f = rot.inv_freq.double().numpy(), float(rot.attention_scaling)
        style = "half" if name == "deepseek_v32" else "interleaved"
        n = len(got["x"])
        q = _turn(want["index_q"].reshape(n, H, d).transpose(1, 0, 2), inv, f, style, "first")
        k = _turn(want["index_k"], inv, f, style, "first")
        ref = np.full((n, n), -np.inf)
        for t in range(n):
            for s in range(t + 1):
                votes = [want["index_w"][t, h] / np.sqrt(H) * max(q[h, t] @ k[s], 0.0) for h in range(H)]
                ref[t, s] = sum(votes) / np.sqrt(d)
        finite = np.isfinite(ref)
        assert (np.isfinite(got["idx.scores"]) == finite).all()
        ts.close(got["idx.scores"][finite], ref[finite], f"index scores of layer {i}")
        ts.close(got["idx.w"] * np.sqrt(H), want["index_w"], f"idx.w of layer {i}")


def test_shared_layers_reuse_the_choice_before(family):
    name, model, theirs, ours = family
    types = getattr(model.config, "indexer_types", None)
    if not types or "shared" not in types:
        pytest.skip("no shared indexer layer")
    for i, kind in enumerate(types):
        if kind == "shared":
            assert (ours[i]["idx.selected"] == ours[i - 1]["idx.selected"]).all()
            assert "idx.scores" not in ours[i]
            assert theirs[i]["chosen"] == theirs[i - 1]["chosen"]


def test_v4_every_layer_kind_its_entries_and_sinks(family):
    """Each kind once; the compressed entries (`pool.k`) as transformers' compressor makes them;
    a row of weights plus the sink's share sums to 1; the pooling weights sum to 1 per feature."""
    name, model, theirs, ours = family
    if name != "deepseek_v4":
        pytest.skip("DeepSeek V4 only")
    assert set(model.config.layer_types) == {"sliding_attention", "compressed_sparse_attention",
                                             "heavily_compressed_attention"}
    for i, (want, got) in enumerate(zip(theirs, ours)):
        n = len(got["x"])
        assert want["weights"].shape[-1] == n + len(got.get("pool.k", ())), "query × (tokens, then entries)"
        np.testing.assert_allclose(got["weights"].sum(-1) + got["sink"], 1.0, rtol=1e-12)
        ts.close(1 - want["weights"].sum(-1), got["sink"], f"sink's share at layer {i}")
        if "pool.k" in got:
            ts.close(got["pool.k"], want["entries"], f"compressed entries of layer {i}")
            np.testing.assert_allclose(got["pool.weights"].sum(axis=1), 1.0, rtol=1e-12)
