"""`attnsim model` and tracer.model_view on the dense families of 2026 (CONTRACT §20, §17): each
layer's kind (KV shared from layer L, K = V, chunked C, no positions), what it keeps (0 numbers a
token where it reads another layer's cache), the whole cache against the configuration's arithmetic
written here, and each head's matrix as transformers computes it (its `previous` role score)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import tiny_dense2026 as td
import tracer
from tiny_dense2026 import tiny  # noqa: F401  (the fixture)
from tui.cli import main


def previous(weights: np.ndarray) -> np.ndarray:
    """TransformerLens's previous-token score of each head: Σ A⊙D / Σ A, D the key just before the query."""
    n = weights.shape[-1]
    d = np.eye(n, k=-1)
    return (weights * d).sum(axis=(1, 2)) / weights.sum(axis=(1, 2))


def test_gemma4s_layers_and_cache(tiny, capsys):
    folder, data, ids, ref = tiny("gemma4_text")
    capsys.readouterr()
    assert main(["model", str(folder), "--text", td.TEXT, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    kinds = [row["kind"] for row in doc["layers"]]
    assert kinds == ["sliding 3", "global, K = V", "sliding 3", "sliding 3, KV shared from layer 2",
                     "global, KV shared from layer 1"]
    # the configuration's arithmetic: head_dim 8 × 2 kv heads on sliding layers, 16 × 1 on global ones;
    # layers 3 and 4 read layers 2 and 1 and keep nothing; a sliding layer keeps its last 3 tokens
    per_token = [2 * 2 * 8, 2 * 1 * 16, 2 * 2 * 8, 0, 0]
    assert [row["cache_per_token"] for row in doc["layers"]] == per_token
    n = len(ids)
    numbers = 32 * min(n, 3) + 32 * n + 32 * min(n, 3)
    assert doc["cache_bytes"] == numbers * 4   # float32, as the tiny checkpoint is saved
    for row, r in zip(doc["layers"], ref):
        np.testing.assert_allclose([h["previous"] for h in row["heads"]], previous(r["weights"]), atol=1e-4)


def test_llama4s_chunks_and_nope_layers(tiny):
    folder, data, ids, ref = tiny("llama4_text")
    view = tracer.model_view(folder, td.TEXT)
    assert [r.kind for r in view.layers] == ["chunked 3", "full, no positions"] * 2
    assert view.layers[0].memory.window == 3 and view.layers[1].memory.window is None


def test_mistral4s_latent_layers(tiny, capsys):
    """Mistral Small 4's wrapper: every layer latent with its queries warmed; it keeps its latent and rotary key,
    kv_lora_rank + qk_rope_head_dim = 8 + 4 numbers a token, where 4 heads' keys and values of 6 would be 48."""
    folder, data, ids, ref = tiny("mistral3")
    capsys.readouterr()
    assert main(["model", str(folder), "--text", td.TEXT, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [row["kind"] for row in doc["layers"]] == ["latent, rope yarn ×4, τ"] * 2
    assert [row["cache_per_token"] for row in doc["layers"]] == [8 + 4] * 2
    assert doc["cache_bytes"] == 2 * 12 * len(ids) * 4 and doc["mha_cache_bytes"] == 2 * 2 * 4 * 6 * len(ids) * 4
    for row, r in zip(doc["layers"], ref):
        np.testing.assert_allclose([h["previous"] for h in row["heads"]], previous(r["weights"]), atol=1e-4)


@pytest.mark.parametrize("change, message", [
    (dict(model_type="ministral3"), "model_type: 'ministral3' is not traced yet; expected one of "),
    (dict(attention_bias=True), "attention_bias: expected false for a traced latent attention layer"),
])
def test_a_mistral3_it_cannot_read_is_one_line_before_any_layer(tiny, tmp_path, capsys, change, message):
    import shutil
    folder, data, ids, ref = tiny("mistral3")
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    (copy / "config.json").write_text(json.dumps({**data, "text_config": {**data["text_config"], **change}}),
                                      encoding="utf-8")
    capsys.readouterr()
    assert main(["model", str(copy), "--text", td.TEXT]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("attnsim: error: ") and message in err, err
