"""`attnsim model` and tracer.model_view (CONTRACT §20): role scores against TransformerLens's
detector formula written here, on each layer's weights as `attnsim export` writes them; circuits'
singular values against NumPy on the checkpoint's own matrices, each head's key/value group
written out; the cache figures against the configs' arithmetic; every block run once."""
from __future__ import annotations

import json

import numpy as np
import pytest

import tracer
from tracer.scenario.files import scenarios_dir
from tui.cli import main

pytest.importorskip("safetensors")
tokenizers = pytest.importorskip("tokenizers")
from safetensors.numpy import load_file  # noqa: E402

INDUCTION = scenarios_dir() / "induction"
TEXT = "my cat saw a red bird near the old tree . my cat saw a red bird"   # the built-in's own text


def run_json(capsys, *argv) -> dict:
    capsys.readouterr()
    assert main(["model", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def detector_patterns(ids: list[int]) -> dict[str, np.ndarray]:
    """TransformerLens's detection patterns (head_detector.py), written out with loops; `first` is
    the first key."""
    n = len(ids)
    d = {role: np.zeros((n, n)) for role in ("previous", "first", "duplicate", "induction")}
    for i in range(n):
        d["first"][i, 0] = 1
        if i > 0:
            d["previous"][i, i - 1] = 1
        for j in range(i):
            if ids[j] == ids[i]:
                d["duplicate"][i, j] = 1          # an earlier copy of the query's token
                d["induction"][i, j + 1] = 1      # the key after it
    return d


@pytest.fixture(scope="module")
def induction(tmp_path_factory):
    """The view of the shipped model as JSON, and each layer's weights exported as npz."""
    folder = tmp_path_factory.mktemp("exported")
    weights = []
    for layer in (0, 1):
        path = folder / f"layer{layer}.npz"
        assert main(["export", "induction", "--layer", str(layer), "-o", str(path)]) == 0
        with np.load(path, allow_pickle=False) as f:
            weights.append([f[f"h{h}.weights"] for h in range(4)])
    assert main(["model", "induction", "--json"]) == 0
    return weights


def test_role_scores_are_the_detectors_on_each_layers_weights(induction, capsys):
    got = run_json(capsys, "induction")
    ids = tokenizers.Tokenizer.from_file(str(INDUCTION / "tokenizer.json")).encode(TEXT).ids
    patterns = detector_patterns(ids)
    for layer, heads in enumerate(induction):
        for h, a in enumerate(heads):
            row = got["layers"][layer]["heads"][h]
            for role, d in patterns.items():
                assert row[role] == pytest.approx((a * d).sum() / a.sum(), abs=1e-12), (layer, h, role)
    every = [(row[role], layer, row["head"]) for layer, entry in enumerate(got["layers"]) for row in entry["heads"]
             for role in ("induction",)]
    assert max(every)[1:] == (1, 3)             # layer 1's head 3: the best induction head
    previous = [(row["previous"], layer, row["head"]) for layer, entry in enumerate(got["layers"])
                for row in entry["heads"]]
    assert max(previous)[1:] == (0, 2)          # layer 0's head 2: the best previous-token head


def _sigmas(m: np.ndarray) -> list[float]:
    return list(np.linalg.svd(m, compute_uv=False)[:3])


def test_circuits_of_a_conv1d_checkpoint_against_numpy(capsys):
    """GPT-2 keeps q, k and v side by side in c_attn (in × out); 4 heads of 16, no groups."""
    got = run_json(capsys, "induction")
    w = {k: v.astype(np.float64) for k, v in load_file(INDUCTION / "model.safetensors").items()}
    for layer in (0, 1):
        qkv, o = w[f"transformer.h.{layer}.attn.c_attn.weight"], w[f"transformer.h.{layer}.attn.c_proj.weight"]
        wq, wk, wv = qkv[:, :64], qkv[:, 64:128], qkv[:, 128:]
        for h in range(4):
            cols = slice(16 * h, 16 * h + 16)
            row = got["layers"][layer]["heads"][h]
            assert row["qk"] == pytest.approx(_sigmas(wq[:, cols] @ wk[:, cols].T), rel=1e-10)
            assert row["ov"] == pytest.approx(_sigmas(wv[:, cols] @ o[cols, :]), rel=1e-10)


def test_grouped_query_circuits_read_each_heads_own_group(checkpoint, capsys):
    """Llama, 4 query heads over 2 key/value groups of 8: heads 0 and 1 read group 0, 2 and 3 group 1."""
    import tiny_checkpoints as tc
    folder, _ = checkpoint("llama")
    got = run_json(capsys, str(folder), "--text", tc.TEXT)
    w = {k: v.astype(np.float64) for k, v in load_file(folder / "model.safetensors").items()}
    group = [0, 0, 1, 1]
    for layer in range(3):
        p = f"model.layers.{layer}.self_attn."
        wq, wk, wv, wo = (w[p + f"{m}_proj.weight"].T for m in "qkvo")   # nn.Linear saves out × in
        entry = got["layers"][layer]
        assert (entry["query_heads"], entry["kv_heads"]) == (4, 2)
        for h in range(4):
            q, g = slice(8 * h, 8 * h + 8), slice(8 * group[h], 8 * group[h] + 8)
            assert entry["heads"][h]["qk"] == pytest.approx(_sigmas(wq[:, q] @ wk[:, g].T), rel=1e-9)
            assert entry["heads"][h]["ov"] == pytest.approx(_sigmas(wv[:, g] @ wo[q, :]), rel=1e-9)


def test_a_sliding_grouped_models_cache_against_its_config(checkpoint, capsys):
    """Gemma 2: every other layer slides over 3 tokens; 2 key/value heads of 8; float32."""
    import tiny_checkpoints as tc
    folder, _ = checkpoint("gemma2")
    cfg = json.loads((folder / "config.json").read_text())
    got = run_json(capsys, str(folder), "--text", tc.TEXT, "--context", "1000")
    per_token = 2 * cfg["num_key_value_heads"] * cfg["head_dim"]
    kept = [3 if t == "sliding_attention" else 1000 for t in cfg["layer_types"]]
    assert cfg["sliding_window"] == 3 and "sliding_attention" in cfg["layer_types"]
    assert got["cache_bytes"] == 4 * per_token * sum(kept)
    assert got["mha_cache_bytes"] == 4 * 1000 * cfg["num_hidden_layers"] * 2 * cfg["num_attention_heads"] * cfg["head_dim"]
    assert [e["kind"] for e in got["layers"]] == ["sliding 3" if t == "sliding_attention" else "full"
                                                  for t in cfg["layer_types"]]
    assert all(e["cache_per_token"] == per_token and e["state"] == 0 for e in got["layers"])


@pytest.fixture(scope="module")
def deepseek(tmp_path_factory):
    """A tiny DeepSeek-V3 (latent attention, compressed queries), float32, and its weights as
    transformers computes them on the text."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import tiny_checkpoints as tc
    folder = tmp_path_factory.mktemp("deepseek")
    torch.manual_seed(3)
    cfg = transformers.DeepseekV3Config(
        vocab_size=128, hidden_size=32, intermediate_size=40, moe_intermediate_size=12, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=4, n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2,
        kv_lora_rank=6, qk_rope_head_dim=4, qk_nope_head_dim=6, v_head_dim=5, q_lora_rank=10, first_k_dense_replace=1,
        n_group=1, topk_group=1, max_position_embeddings=64, rms_norm_eps=1e-6)
    cfg._attn_implementation = "eager"
    model = transformers.DeepseekV3ForCausalLM(cfg).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 2 and "embed" not in name:
                p.mul_(6.0)
    model.save_pretrained(folder, safe_serialization=True)
    transformers.PreTrainedTokenizerFast(tokenizer_object=tc.tokenizer("llama")).save_pretrained(folder)
    ids = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json")).encode(tc.TEXT).ids
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True)
    return folder, ids, [a[0].double().numpy() for a in out.attentions]


def test_a_latent_models_cache_and_scores(deepseek, capsys):
    import tiny_checkpoints as tc
    folder, ids, attentions = deepseek
    cfg = json.loads((folder / "config.json").read_text())
    got = run_json(capsys, str(folder), "--text", tc.TEXT, "--context", "500")
    latent = cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]          # c_kv and the shared rotary key
    assert [e["kind"] for e in got["layers"]] == ["latent"] * 3
    assert all(e["cache_per_token"] == latent for e in got["layers"])
    assert got["cache_bytes"] == 4 * 500 * 3 * latent
    assert got["mha_cache_bytes"] == 4 * 500 * 3 * 2 * cfg["num_attention_heads"] * cfg["v_head_dim"]
    patterns = detector_patterns(ids)
    for layer, a in enumerate(attentions):   # transformers' own weights, float32
        for h in range(4):
            for role, d in patterns.items():
                want = (a[h] * d).sum() / a[h].sum()
                assert got["layers"][layer]["heads"][h][role] == pytest.approx(want, abs=2e-4), (layer, h, role)


def test_every_block_is_read_and_run_once(monkeypatch):
    """One pass over the checkpoint: each tensor read whole once, each block's attention once."""
    from tracer.models import forward
    from tracer.models.weights import Tensors
    reads, runs = [], []
    rows, attention = Tensors.rows, forward.attention
    monkeypatch.setattr(Tensors, "rows", lambda self, name, ids: reads.append((name, ids is None)) or rows(self, name, ids))
    monkeypatch.setattr(forward, "attention", lambda *a, **k: runs.append(1) or attention(*a, **k))
    view = tracer.model_view("induction")
    assert len(runs) == 2 and [r.layer for r in view.layers] == [0, 1]
    whole = [name for name, all_rows in reads if all_rows]
    assert len(whole) == len(set(whole)) and any(".h.1.mlp." in name for name in whole)


@pytest.mark.parametrize("argv,words", [
    (["model", "by_hand", "--text", "hi"], ("MODEL", "without a [model] section")),
    (["model", "induction", "--text", ""], ("--text", "empty text")),
    (["model", "induction", "--context", "0"], ("--context", "≥ 1")),
    (["model", "induction", "--context", "-3"], ("--context", "≥ 1")),
    (["model", str(INDUCTION)], ("--text", "missing")),
    (["model", "no_such_model_here"], ("no_such_model_here",)),
])
def test_refusals_are_one_line(argv, words, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    capsys.readouterr()
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert captured.out == "" and len(err) == 1 and err[0].startswith("attnsim: error: "), err
    assert all(w in err[0] for w in words), err[0]


def test_the_text_report(capsys):
    capsys.readouterr()
    assert main(["model", "induction", "--context", "4096"]) == 0
    out = capsys.readouterr().out
    assert "layer 1 · full · heads 4 q / 4 kv · keeps 128 numbers a token (KV cache)" in out
    # 2 layers × 128 numbers × 4096 tokens × 4 bytes (float32)
    assert f"cache at 4,096 tokens (float32): {2 * 128 * 4096 * 4:,} bytes" in out
    assert "induction L1 h3" in out and "previous L0 h2" in out
    assert max(len(line) for line in out.splitlines()[1:]) <= 80


def _png_pixels(data: bytes) -> np.ndarray:
    """An 8-bit RGB PNG without filters, decoded here (rows × cols × 3)."""
    import struct
    import zlib
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, chunks = 8, {}
    while at < len(data):
        size = struct.unpack(">I", data[at:at + 4])[0]
        chunks.setdefault(data[at + 4:at + 8], b"")
        chunks[data[at + 4:at + 8]] += data[at + 8:at + 8 + size]
        at += 12 + size
    cols, rows = struct.unpack(">II", chunks[b"IHDR"][:8])
    raw = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), dtype=np.uint8).reshape(rows, 1 + 3 * cols)
    return raw[:, 1:].reshape(rows, cols, 3)


def test_the_notebook_html_draws_each_head_without_script(induction):
    import base64
    import re
    page = tracer.model_view("induction")._repr_html_()
    assert "<script" not in page.lower() and "onerror" not in page
    tiles = re.findall(r'alt="layer (\d) head (\d)"[^>]*src="data:image/png;base64,([^"]+)"', page)
    assert [(int(a), int(b)) for a, b, _ in tiles] == [(layer, h) for layer in (0, 1) for h in range(4)]
    for layer, h, data in tiles:
        pixels = _png_pixels(base64.b64decode(data)).astype(int)
        weights = induction[int(layer)][int(h)]
        assert pixels.shape[:2] == weights.shape          # 17 tokens: drawn whole
        brightest = pixels.sum(axis=2).argmax(axis=1)      # the ramp brightens from 0 to the largest weight
        assert (brightest == weights.argmax(axis=1)).mean() > 0.9, (layer, h)
    assert "layer 1 head 3: previous" in page and "induction L1 h3" in page


def test_the_figure_of_the_whole_model(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    svg, png = tmp_path / "model.svg", tmp_path / "model.png"
    assert main(["export", "--model", "induction", "--figure", "model", "-o", str(svg)]) == 0
    assert "the model view of induction, 2 layers × 4 heads" in capsys.readouterr().out
    text = svg.read_text()
    assert all(f">h{h}</text>" in text for h in range(4)) and "layer 1: full" in text and "ind 0.35" in text
    assert main(["export", "induction", "--figure", "model", "-o", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()
    assert main(["export", "--model", "induction", "--figure", "model", "--layer", "1", "-o", str(svg)]) == 2
    assert "--layer: expected none with --figure model" in capsys.readouterr().err


def test_singular_values_of_dependent_columns_against_numpy():
    """A head whose W_K repeats a column (its Gram matrix singular) and one of zeros: still NumPy's values."""
    from tracer.model_view.circuits import top_singular
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(3, 20, 6)), rng.normal(size=(3, 20, 6))
    b[1][:, 5] = b[1][:, 0]
    b[2] = 0.0
    want = [np.linalg.svd(a[h] @ b[h].T, compute_uv=False)[:3] for h in range(3)]
    np.testing.assert_allclose(top_singular(a, b), want, rtol=1e-10, atol=1e-12)


def test_a_broken_last_block_is_refused_before_anything_is_printed(checkpoint, tmp_path, capsys):
    import shutil
    import tiny_checkpoints as tc
    from safetensors.numpy import save_file
    folder, _ = checkpoint("llama")
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    w = load_file(broken / "model.safetensors")
    w["model.layers.2.mlp.down_proj.weight"] = w["model.layers.2.mlp.down_proj.weight"][:, :-1].copy()
    save_file(w, str(broken / "model.safetensors"), metadata={"format": "pt"})
    capsys.readouterr()
    assert main(["model", str(broken), "--text", tc.TEXT]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert captured.out == "" and len(err) == 1 and "model.layers.2.mlp.down_proj.weight" in err[0], captured
