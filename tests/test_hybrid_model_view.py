"""`attnsim model` on the hybrid checkpoints (CONTRACT §20, §16), tiny ones made with transformers
(tests/tiny_hybrid.py): each layer's kind and what it keeps (a linear layer its state, fixed; a softmax
layer its cache a token) from the config's numbers, and the heads' role scores from transformers' own
forward: the softmax layers' weights, and for a linear layer the implicit weights found by feeding
one-hot values through the recurrence on transformers' q, k, decay and β."""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
import tiny_hybrid  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

from tui.cli import main  # noqa: E402

TEXT = "the cat sat on the mat . the cat sat on"
FAMILIES = ["qwen3_next", "qwen3_5", "olmo_hybrid", "kimi_linear"]


@pytest.fixture(scope="module", params=FAMILIES)
def viewed(request, tmp_path_factory):
    """(the model, transformers' per-layer record, the token ids, `attnsim model --json`'s output)."""
    folder = tmp_path_factory.mktemp(request.param)
    model = tiny_hybrid.build(request.param, folder)
    ids = Tokenizer.from_file(str(folder / "tokenizer.json")).encode(TEXT).ids
    return model, tiny_hybrid.run_model(model, ids), ids, folder


def implicit(q, k, alpha, beta):
    """A (query × key) of one head: column s is o when value s is 1 and the others 0; q, k L2-normed
    (√(Σx² + 1e-6)), q ÷ √d_k, S ← (I − β·k·kᵀ)·diag(α)·S + β·k·vᵀ, o = Sᵀq."""
    unit = lambda a: a / np.sqrt((a * a).sum(axis=1, keepdims=True) + 1e-6)   # noqa: E731
    q, k = unit(q) / np.sqrt(q.shape[1]), unit(k)
    n, columns = len(k), []
    for s in range(n):
        S, out = np.zeros((k.shape[1], 1)), []
        for t in range(n):
            S = np.resize(alpha[t], k.shape[1])[:, None] * S
            S = S + beta[t] * np.outer(k[t], float(t == s) - S.T @ k[t])
            out.append((S.T @ q[t])[0])
        columns.append(out)
    return np.array(columns).T


def share(a: np.ndarray, pattern: np.ndarray) -> np.ndarray:
    """Σ A⊙D / Σ A for each head, written out."""
    return np.array([(m * pattern).sum() / m.sum() for m in a])


def test_each_layer_s_kind_memory_and_roles(viewed, capsys):
    model, ref, ids, folder = viewed
    assert main(["model", str(folder), "--text", TEXT, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    text = getattr(model.config, "text_config", model.config)
    assert len(got["layers"]) == len(ref) == len(tiny_hybrid.decoder_layers(model))
    n = len(ids)
    previous, first = np.eye(n, k=-1), np.zeros((n, n))
    first[:, 0] = 1
    for i, (row, want) in enumerate(zip(got["layers"], ref)):
        if "beta" in want:   # transformers ran its delta rule here
            lin = getattr(text, "linear_attn_config", None)
            heads, d_k, d_v = (lin["num_heads"], lin["head_dim"], lin["head_dim"]) if lin else \
                (text.linear_num_value_heads, text.linear_key_head_dim, text.linear_value_head_dim)
            assert row["kind"].startswith("linear (")
            assert (row["state"], row["cache_per_token"]) == (heads * d_k * d_v, 0)
            a = np.stack([implicit(want["q"][h].astype(float), want["k"][h].astype(float), want["decay"][h],
                                   want["beta"][h]) for h in range(heads)])
        else:
            per = text.kv_lora_rank + text.qk_rope_head_dim if getattr(text, "kv_lora_rank", None) else \
                2 * text.num_key_value_heads * getattr(text, "head_dim", text.hidden_size // text.num_attention_heads)
            assert row["state"] == 0 and row["cache_per_token"] == per, (i, row["kind"])
            a = want["weights"].astype(float)
        for role, pattern in (("previous", previous), ("first", first)):
            np.testing.assert_allclose([head[role] for head in row["heads"]], share(a, pattern), rtol=1e-3, atol=1e-4,
                                       err_msg=f"layer {i} {role}")
    numbers = sum(r["cache_per_token"] * n + r["state"] for r in got["layers"])
    assert got["cache_bytes"] == 4 * numbers   # the tiny checkpoints are float32


def test_the_report_says_what_a_linear_layer_keeps(viewed, capsys):
    _, _, _, folder = viewed
    assert main(["model", str(folder), "--text", TEXT]) == 0
    out = capsys.readouterr().out
    assert "· linear (" in out and "a state of" in out and "numbers in all (state)" in out
