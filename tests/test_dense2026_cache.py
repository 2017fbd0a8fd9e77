"""Gemma 4's KV cache table (tracer.mechanisms.kv_sharing.cache, read from config.json by
tracer.models.dense2026.gemma.cache_table): against the configuration's arithmetic written here,
and against what transformers' own cache holds after a forward of a tiny Gemma 4 and Gemma 3n."""
from __future__ import annotations

import pytest
import torch

import tiny_dense2026 as td
from tiny_dense2026 import tiny  # noqa: F401  (the fixture)
from tracer.mechanisms.kv_sharing.cache import kept, numbers, unshared
from tracer.models.dense2026.gemma import cache_table

# Gemma 4 E2B's text model as published: 35 layers, every fifth global (the last too), the last 20
# sharing, sliding heads of 256, global heads of 512 (`global_head_dim`), one key/value head, W = 512
LAYERS, SHARED, WINDOW = 35, 20, 512
TYPES = ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(LAYERS)]
CONFIG = dict(model_type="gemma4_text", num_hidden_layers=LAYERS, num_attention_heads=8, num_key_value_heads=1,
              head_dim=256, global_head_dim=512, hidden_size=1536, sliding_window=WINDOW,
              num_kv_shared_layers=SHARED, layer_types=TYPES, hidden_size_per_layer_input=256)


def test_table_of_a_small_gemma4():
    rows = cache_table(CONFIG)
    first = LAYERS - SHARED                                  # 15 layers compute keys and values
    sliding_own = sum(t == "sliding_attention" for t in TYPES[:first])     # 12
    global_own = first - sliding_own                                        # 3
    assert (sliding_own, global_own) == (12, 3)
    per_sliding, per_global = 2 * 1 * 256, 2 * 1 * 512      # k and v, one key/value head
    assert [r.per_token for r in rows] == [per_global if t == "full_attention" else per_sliding
                                           for t in TYPES[:first]] + [0] * SHARED
    assert [r.source for r in rows[first:]] == [14 if t == "full_attention" else 13 for t in TYPES[first:]]
    for tokens in (1, 100, 511, 512, 4096, 32768):
        held = sliding_own * per_sliding * min(tokens, WINDOW - 1) + global_own * per_global * tokens
        assert numbers(rows, tokens, WINDOW) == held
        every = (sum(t == "sliding_attention" for t in TYPES) * per_sliding * min(tokens, WINDOW - 1)
                 + sum(t == "full_attention" for t in TYPES) * per_global * tokens)
        assert unshared(rows, tokens, WINDOW) == every
    # 32 768 tokens in bfloat16: 2 bytes a number
    assert numbers(rows, 32768, WINDOW) * 2 == (12 * 512 * 511 + 3 * 1024 * 32768) * 2 == 207_605_760   # 198 MiB


def test_global_layers_k_eq_v_still_cache_both():
    rows = cache_table({**CONFIG, "attention_k_eq_v": True, "num_global_key_value_heads": 4})
    glob = [r for r in rows if r.kind == "global" and r.source == r.layer]
    assert all(r.k_eq_v and r.kv_heads == 4 and r.per_token == 2 * 4 * 512 for r in glob)
    assert all(not r.k_eq_v for r in rows if r.kind == "sliding")


@pytest.mark.parametrize("family", ["gemma4_text", "gemma3n_text"])
def test_table_is_what_transformers_caches(tiny, family):
    """After one forward of TEXT, each layer's DynamicCache holds exactly the tokens and numbers
    the table says: none for a sharing layer, the last W − 1 on a sliding one."""
    import transformers
    folder, data, ids, _ = tiny(family)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder).double().eval()
    with torch.no_grad():
        cache = model(input_ids=torch.tensor([ids]), use_cache=True).past_key_values
    rows = cache_table(data)
    total = 0
    for row, layer in zip(rows, cache.layers):
        keys = getattr(layer, "keys", None)
        held = 0 if keys is None or not hasattr(keys, "shape") else keys.numel() + layer.values.numel()
        assert held == row.per_token * kept(row, len(ids), data["sliding_window"]), (family, row)
        total += held
    assert total == numbers(rows, len(ids), data["sliding_window"]) > 0
