"""DeepSeek V4 traced step by step (CONTRACT §18): tracer.from_model and `attnsim show/export --model`
on the tiny deepseek_v4 checkpoint (tests/tiny_sparse.py: a sliding, a compressed sparse and a
heavily compressed layer), every layer against transformers' eager forward: x after the
hyper-connection, the entries, the indexer's choice, every head's weights (exact zeros where a key
is hidden, rows summing to 1 − the sink), z turned back, the groups' projections and the output."""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import tiny_sparse as ts  # noqa: E402
import tracer  # noqa: E402
from tracer.errors import ScenarioError  # noqa: E402
from tracer.explain import explain  # noqa: E402
from tracer.models.tokens import encode  # noqa: E402
from tui.cli import main  # noqa: E402

TEXT = "the cat sat on the mat and the dog sat on the log"
KINDS = ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"]


def close(ours, theirs, what: str) -> None:
    """Equal to float32's precision (the checkpoint is saved in float32; transformers mixes the streams
    in float32), relative to the largest number compared."""
    theirs = np.asarray(theirs, dtype=np.float64)
    assert np.shape(ours) == theirs.shape, what
    assert np.abs(ours - theirs).max() <= 2e-6 * max(1.0, np.abs(theirs).max()), what


@pytest.fixture(scope="module")
def v4(tmp_path_factory):
    """(folder, transformers' layers on TEXT with `z` (the heads' outputs turned back, side by side)
    and `groups` (W_a's projections) caught at the grouped output, every layer's trace)."""
    folder = tmp_path_factory.mktemp("deepseek_v4")
    model = ts.build("deepseek_v4", folder, seed=3)
    ids, _ = encode(folder, TEXT, 64)
    caught, hooks = {}, []
    for i, layer in enumerate(model.model.layers):
        o_a = layer.self_attn.o_a_proj
        hooks.append(o_a.register_forward_pre_hook(
            lambda m, args, i=i: caught.__setitem__(("z", i), args[0][0].reshape(len(ids), -1).numpy())))
        hooks.append(o_a.register_forward_hook(
            lambda m, args, out, i=i: caught.__setitem__(("groups", i), out[0].flatten(1).numpy())))
        hooks.append(layer.attn_hc.register_forward_hook(   # (post, comb, collapsed)
            lambda m, args, out, i=i: caught.__setitem__(("mixes", i), (out[0][0].numpy(), out[1][0].numpy()))))
    try:
        theirs = ts.run(model, ids)
    finally:
        for h in hooks:
            h.remove()
    for (key, i), value in caught.items():
        theirs[i][key] = value
    traces = [tracer.run(tracer.from_model(str(folder), TEXT, i)) for i in range(3)]
    return folder, theirs, traces


def test_every_layer_against_transformers(v4):
    _, theirs, traces = v4
    for i, (tr, want) in enumerate(zip(traces, theirs)):
        n = len(tr.scenario.tokens)
        assert tr.scenario.model["kind"] == KINDS[i]
        close(tr["x"], want["collapsed"], f"layer {i}: x")
        close(tr["norm_in"], want["attn_in"], f"layer {i}: norm_in")
        a = want["weights"]
        assert a.shape[2] > n or i == 0, "a compressed layer without entries proves nothing"
        for h in range(4):
            w = tr[f"h{h}.weights"]
            close(w, a[h], f"layer {i} head {h}: weights")
            assert ((w == 0) == (a[h] == 0)).all(), f"layer {i} head {h}: exact zeros where a key is hidden"
            close(tr[f"h{h}.sink"][:, 0], 1 - a[h].sum(axis=1), f"layer {i} head {h}: the sink's share")
        close(tr["concat"], want["z"], f"layer {i}: z turned back")
        close(tr["o_groups"], want["groups"], f"layer {i}: o_groups")
        close(tr["out"], want["out"], f"layer {i}: out")
        post, comb = want["mixes"]   # X'_k = post_k·out + Σ_j comb_jk·X_j, with transformers' post and comb
        after = post[:, :, None] * want["out"][:, None, :] + np.einsum("tjk,tjd->tkd", comb, want["x"])
        close(tr["streams_after"], after.reshape(-1, after.shape[2]), f"layer {i}: streams_after")
        if i:
            close(tr["pool.k"], want["entries"], f"layer {i}: pool.k")
            close(tr["pool.weights"].reshape(len(tr["pool.k"]), -1, 16).sum(axis=1), np.ones_like(tr["pool.k"]),
                  "pooling weights sum to 1 over an entry's slots")
    chosen, index = traces[1]["idx.selected"], traces[1]["idx.scores"]
    assert [set(np.flatnonzero(row)) for row in chosen] == theirs[1]["chosen"]
    complete = np.isfinite(index)   # transformers scores every entry, and masks the incomplete ones later
    assert complete.any() and not complete.all()
    close(index[complete], theirs[1]["index_scores"][complete], "the index scores of the complete entries")


def test_the_steps_explain_with_their_numbers(v4):
    _, _, traces = v4
    sliding, sparse, heavy = traces
    assert "is outside the window of the last 4 tokens" in explain(sliding, "h0.masked", 9, 2)
    assert "comes after the query" in explain(sliding, "h0.masked", 2, 9)
    n = len(sparse.scenario.tokens)
    assert "has seen only up to token" in explain(sparse, "h1.masked", 5, n + 2)
    dropped = [(i, e) for i in range(n) for e in range(3)
               if (i + 1) // 4 > e and not sparse["idx.selected"][i, e]]
    assert dropped, "the tiny text should make the indexer drop an entry"
    i, e = dropped[0]
    told = explain(sparse, "h0.masked", i, n + e)
    assert f"the indexer dropped entry {e}" in told and "below the 2nd best" in told
    z = explain(heavy, "h2.z", 5, 15)   # the last pair of the turned features: a·sin + b·cos
    a, b = heavy["h2.z_rot"][5, 14], heavy["h2.z_rot"][5, 15]
    angle = -heavy.scenario.compressed["theta"][5, -1]
    assert np.isclose(b * np.cos(angle) + a * np.sin(angle), heavy["h2.z"][5, 15])
    assert "cos(" in z and "position 5" in z
    assert "not turned" in explain(heavy, "h2.z", 5, 0) and "entry 0 pools tokens" in explain(heavy, "kv0.k", n, 0)
    assert "slot 0 of entry 0 is empty" in explain(sparse, "pool.weights", 0, 0)
    assert "group 1 projects its own 2 heads" in explain(sparse, "o_groups", 3, sparse["o_groups"].shape[1] - 1)


def test_show_and_export_on_the_command_line(v4, tmp_path, capsys):
    folder = str(v4[0])
    assert main(["show", "--model", folder, "--text", TEXT, "--layer", "1"]) == 0
    out = capsys.readouterr().out
    assert "compressed_sparse_attention (m = 4, top 2 of 3 entries by its indexer; window 4)" in out
    assert "x = Σ_j pre_j·X_j over 3 streams" in out
    for sid in ("hc.pre", "pool.weights", "pool.k", "idx.scores", "idx.selected", "kv0.k", "h3.q_rot", "h3.z_rot",
                "h3.z", "o_groups", "out"):
        assert f"\n{sid} " in out, sid
    path = tmp_path / "v4.json"
    assert main(["export", "--model", folder, "--text", TEXT, "--layer", "2", "--format", "json", "-o", str(path)]) == 0
    got = json.loads(path.read_text())
    assert got["scenario"]["compressed"] == {"kind": KINDS[2], "window": 4, "entries": 1, "streams": 3, "m": 8,
                                             "x": "x = Σ_j pre_j·X_j over 3 streams"}
    ids = [s["id"] for s in got["steps"]]
    assert ids[:12] == ["x", "streams", "hc.pre", "norm_in", "q_a", "c_q", "pool.c", "pool.z", "pool.weights",
                        "pool.sum", "pool.norm", "pool.k"]
    assert ids[-5:] == ["o_groups", "out", "hc.post", "hc.comb", "streams_after"]
    steps = {s["id"]: s for s in got["steps"]}
    assert steps["h0.weights"]["shape"] == [14, 15] and steps["kv0.k"]["shape"] == [14 + 1, 16]


def test_a_heads_list_is_refused_in_one_line(v4):
    with pytest.raises(ScenarioError, match="expected no heads list for a deepseek_v4 layer"):
        tracer.from_model(str(v4[0]), TEXT, 1, heads=[0])
