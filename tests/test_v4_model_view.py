"""DeepSeek V4 in the model view (CONTRACT §20, §18): `attnsim model` and tracer.model_view on the
tiny deepseek_v4 checkpoint (tests/tiny_sparse.py: one sliding, one compressed sparse and one
heavily compressed layer), every head's matrix against transformers' eager forward, the role
scores, the circuits and the cache against references written here; a bad tensor refused in one
line before anything is printed. `show --model` traces its layers step by step: test_v4_traced.py."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import tiny_sparse as ts  # noqa: E402
import tracer  # noqa: E402
from tracer.models.tokens import encode  # noqa: E402
from tui.cli import main  # noqa: E402

TEXT = "the cat sat on the mat and the dog sat on the log"


@pytest.fixture(scope="module")
def v4(tmp_path_factory):
    """(folder, ids, transformers' layers on TEXT), built once."""
    folder = tmp_path_factory.mktemp("deepseek_v4")
    model = ts.build("deepseek_v4", folder, seed=3)
    ids, _ = encode(folder, TEXT, 64)
    return folder, ids, ts.run(model, ids)


def test_every_head_against_transformers(v4):
    """Tiles (14 tokens and their entries: the whole matrix) are transformers' weights; the role
    scores read the tokens' columns: Σ A⊙D / Σ A with D the key before, or the first key."""
    folder, ids, theirs = v4
    view = tracer.model_view(str(folder), TEXT)
    n = len(ids)
    assert [row.kind for row in view.layers] == ["sliding 4", "compressed 4, top-k 2", "compressed 8"]
    for row, want in zip(view.layers, theirs):
        a = np.asarray(want["weights"], dtype=np.float64)
        assert a.shape[2] > n or row.layer == 0, "a compressed layer without entries proves nothing"
        tiles = np.asarray(row.tiles, dtype=np.float64)
        assert tiles.shape == a.shape
        assert np.abs(tiles - a).max() < 1e-6, f"layer {row.layer}: tiles"
        tokens = a[:, :, :n]
        previous = np.array([sum(tokens[h, i, i - 1] for i in range(1, n)) / tokens[h].sum() for h in range(4)])
        first = tokens[:, :, 0].sum(axis=1) / tokens.sum(axis=(1, 2))
        np.testing.assert_allclose(row.scores["previous"], previous, rtol=1e-5)
        np.testing.assert_allclose(row.scores["first"], first, rtol=1e-5)


def test_circuits_are_the_weights_singular_values(v4):
    """QK = (W_QA·W_QB)_h·W_KVᵀ and OV = W_KV·W_O,h, W_O the grouped output as one matrix, their
    singular values by a full SVD of the d_model × d_model products."""
    from safetensors.numpy import load_file
    folder, _, _ = v4
    t = {k: v.astype(np.float64) for k, v in load_file(folder / "model.safetensors").items()}
    view = tracer.model_view(str(folder), TEXT)
    H, D, groups = 4, 16, 2
    for row in view.layers:
        at = f"model.layers.{row.layer}.attn."
        wq = t[at + "wq_a.weight"].T @ t[at + "wq_b.weight"].T
        wkv = t[at + "wkv.weight"].T
        w_a, w_b = t[at + "wo_a.weight"], t[at + "wo_b.weight"]
        rank, width = w_a.shape[0] // groups, H * D // groups
        w_o = np.zeros((H * D, w_b.shape[0]))
        for g in range(groups):   # group g's heads project through its rows of W_a, then W_b's columns
            w_o[g * width:(g + 1) * width] = w_a[g * rank:(g + 1) * rank].T @ w_b[:, g * rank:(g + 1) * rank].T
        for h in range(H):
            qk = np.linalg.svd(wq[:, h * D:(h + 1) * D] @ wkv.T, compute_uv=False)[:3]
            ov = np.linalg.svd(wkv @ w_o[h * D:(h + 1) * D], compute_uv=False)[:3]
            np.testing.assert_allclose(row.qk[h], qk, rtol=1e-6)
            np.testing.assert_allclose(row.ov[h], ov, rtol=1e-6)


def test_the_cache_counts_the_window_and_the_entries(v4, capsys):
    """A layer keeps its one head (K = V, 16 numbers) for the last 4 tokens, and a compressed one an
    entry every m tokens: 16 + the indexer's 8 every 4 tokens, 16 every 8. 14 tokens, float32."""
    folder, _, _ = v4
    assert main(["model", str(folder), "--text", TEXT, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    window = 16 * 4
    numbers = window + (window + 14 // 4 * (16 + 8)) + (window + 14 // 8 * 16)
    assert got["model_type"] == "deepseek_v4" and got["cache_bytes"] == 4 * numbers
    assert got["mha_cache_bytes"] == 4 * 14 * 3 * (2 * 4 * 16)
    assert [layer["kv_heads"] for layer in got["layers"]] == [1, 1, 1]
    assert main(["model", str(folder), "--text", TEXT]) == 0
    out = capsys.readouterr().out
    assert "layer 1 · compressed 4, top-k 2 · heads 4 q / 1 kv · keeps 16 numbers a token, the last 4 tokens + " \
           "24 numbers every 4 tokens (window + entries)" in out


def test_a_bad_tensor_is_named_before_anything_is_printed(v4, tmp_path, capsys):
    from safetensors.numpy import load_file, save_file
    folder, _, _ = v4
    bad = tmp_path / "bad"
    shutil.copytree(folder, bad)
    tensors = load_file(bad / "model.safetensors")
    key = "model.layers.2.attn.compressor.ape"
    tensors[key] = tensors[key][:-1]
    save_file(tensors, bad / "model.safetensors")
    code = main(["model", str(bad), "--text", TEXT])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert f"{key}: has shape (7, 16); expected (8, 16) for a heavily_compressed_attention layer" in err, err


def test_the_figure_labels_the_entries(v4, tmp_path, capsys):
    """`export --figure model`: each compressed layer's label counts its entries beside the window."""
    pytest.importorskip("matplotlib")
    folder, _, _ = v4
    svg = tmp_path / "v4.svg"
    assert main(["export", "--model", str(folder), "--text", TEXT, "--figure", "model", "-o", str(svg)]) == 0
    assert "the model view of" in capsys.readouterr().out
    text = svg.read_text()
    assert "layer 1: compressed 4, top-k 2" in text and "+ 24 every 4 tokens" in text and "+ 16 every 8 tokens" in text
    assert "layer 0: sliding 4" in text and text.count(" every ") == 2
