"""The formulas of the 2026 mechanisms (tracer/mechanisms/…/formula.py), each against transformers'
own code (its mask functions, its attention modules with the query, key and value they hand to the
attention caught on the way, its rotary initialisers, its configs' sharing modes) and against plain
loops written here, cell by cell, over generated inputs."""
from __future__ import annotations

import math
import sys

import numpy as np
import pytest
import torch
import transformers
from hypothesis import given, strategies as st
from transformers import AttentionInterface

from tracer.mechanisms.chunked.formula import allowed, chunk_start, keys_seen
from tracer.mechanisms.k_eq_v.formula import keys_and_values
from tracer.mechanisms.kv_sharing.formula import sources, stores
from tracer.mechanisms.l2_norm.formula import l2_norm, length
from tracer.mechanisms.norm_after_rope.formula import norm_then_rotate, rotate_then_norm, turn
from tracer.mechanisms.q_temp.formula import first_warm, temperature, warmed
from tracer.models.dense2026.settings import rotary

CAUGHT: dict = {}


def _capture(module, query, key, value, attention_mask, **kwargs):
    """An attention implementation that keeps what the module hands over, then runs its eager one."""
    CAUGHT.update(q=query.detach().numpy()[0], k=key.detach().numpy()[0], v=value.detach().numpy()[0])
    eager = sys.modules[type(module).__module__].eager_attention_forward
    return eager(module, query, key, value, attention_mask, **kwargs)


AttentionInterface.register("capture", _capture)


def caught(config, module_class, x: np.ndarray, layer: int = 0, **kwargs) -> tuple:
    """(module, q, k, v): one attention module of `config` (float64, weights × 4) run on x."""
    config._attn_implementation = "capture"
    torch.manual_seed(1)
    module = module_class(config, layer).double()
    with torch.no_grad():
        for p in module.parameters():
            p.mul_(4.0) if p.ndim == 2 else p.copy_(0.5 + torch.rand(p.shape))
        module(torch.from_numpy(x)[None], attention_mask=None, **kwargs)
    return module, CAUGHT["q"], CAUGHT["k"], CAUGHT["v"]


# ---------------------------------------------------------------- chunked attention

@given(n=st.integers(1, 24), chunk=st.integers(1, 9))
def test_chunked_mask_is_transformers_cell_by_cell(n, chunk):
    from transformers.masking_utils import chunked_causal_mask_function
    fn = chunked_causal_mask_function(chunk, torch.zeros(1, dtype=torch.long))
    ours = allowed(n, chunk)
    for i in range(n):
        for j in range(n):
            theirs = bool(fn(0, 0, torch.tensor(i), torch.tensor(j)))
            assert ours[i, j] == theirs == (j <= i and i // chunk == j // chunk), (i, j)


@given(m=st.integers(1, 30), chunk=st.integers(1, 9), data=st.data())
def test_chunked_rows_for_decoded_tokens_and_counts(m, chunk, data):
    n = data.draw(st.integers(1, m))
    full = allowed(m, chunk)
    np.testing.assert_array_equal(allowed(n, chunk, m), full[m - n:])
    for p in range(m):
        assert chunk_start(p, chunk) == max(j for j in range(p + 1) if full[p, j] and not full[p, :j].any())
        assert keys_seen(p, chunk) == full[p].sum()


def test_chunked_lesson_matrix():
    """8 tokens, chunks of 4 (the built-in `chunked`): the fifth token starts over."""
    want = np.array([[1, 0, 0, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0, 0, 0],
                     [1, 1, 1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 1, 1, 0, 0],
                     [0, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 0, 1, 1, 1, 1]], dtype=bool)
    np.testing.assert_array_equal(allowed(8, 4), want)
    with pytest.raises(ValueError):
        allowed(3, 0)


# ---------------------------------------------------------------- the NoPE query temperature

@given(p=st.integers(0, 10**6), beta=st.floats(0, 2), floor=st.integers(1, 10**4), offset=st.sampled_from([0, 1]))
def test_temperature_is_the_formula(p, beta, floor, offset):
    assert temperature([p], beta, floor, offset)[0] == pytest.approx(1 + beta * math.log(1 + (p + offset) // floor),
                                                                    rel=1e-14)


def test_temperature_is_llama4s_on_its_nope_layers():
    """Llama 4's NoPE layer hands the attention q·τ(p), o = 1 (caught from its own module)."""
    from transformers.models.llama4.modeling_llama4 import Llama4TextAttention
    cfg = transformers.Llama4TextConfig(hidden_size=16, num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                                        num_hidden_layers=1, no_rope_layers=[0], floor_scale=3, attn_scale=0.7,
                                        vocab_size=50, intermediate_size=8, intermediate_size_mlp=8)
    x = np.random.default_rng(0).normal(size=(11, 16))
    module, q, k, v = caught(cfg, Llama4TextAttention, x, position_embeddings=None)
    raw = (x @ module.q_proj.weight.detach().numpy().T).reshape(11, 2, 8).transpose(1, 0, 2)
    np.testing.assert_allclose(q, warmed(raw, np.arange(11), 0.7, 3, offset=1), rtol=1e-6)   # τ in float32 there
    assert first_warm(0.7, 3, 1) == 2 and temperature([1, 2], 0.7, 3)[0] == 1.0


def test_temperature_is_mistral4s_without_the_plus_one():
    from transformers.models.ministral3.modeling_ministral3 import get_llama_4_attn_scale
    p = torch.arange(40)[None]
    theirs = get_llama_4_attn_scale(p.double(), 0.1, 8).numpy().ravel()
    np.testing.assert_allclose(temperature(np.arange(40), 0.1, 8, offset=0), theirs, rtol=1e-15)


# ---------------------------------------------------------------- the weightless "L2" norm

@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=12), st.sampled_from([0.0, 1e-6, 1e-5]))
def test_l2_norm_divides_by_the_root_mean_square(row, eps):
    x = np.array(row)
    ms = math.fsum(v * v for v in row) / len(row) + eps
    if ms == 0:
        return
    # a result below the smallest normal number keeps fewer bits: there its error is counted absolutely
    np.testing.assert_allclose(l2_norm(x, eps), [v / math.sqrt(ms) for v in row], rtol=1e-14, atol=1e-320)


def test_l2_norm_is_llama4s_and_nanochats():
    from transformers.models.llama4.modeling_llama4 import Llama4TextL2Norm
    from transformers.models.nanochat.modeling_nanochat import NanoChatRMSNorm
    x = np.random.default_rng(1).normal(size=(3, 5, 8)) * 7
    for module in (Llama4TextL2Norm(1e-5), NanoChatRMSNorm(1e-5)):        # both compute in float32
        np.testing.assert_allclose(l2_norm(x, 1e-5), module(torch.from_numpy(x)).numpy(), rtol=2e-6)
    np.testing.assert_allclose(np.linalg.norm(l2_norm(x, 0.0), axis=-1), length(8), rtol=1e-14)


# ---------------------------------------------------------------- norm after the rotation

def test_order_matters_only_with_a_gain():
    rng = np.random.default_rng(2)
    x, angles, gain = rng.normal(size=(2, 6, 8)), rng.normal(size=(6, 4)) * 3, rng.uniform(0.2, 3, size=8)
    np.testing.assert_allclose(norm_then_rotate(x, angles, 1e-6), rotate_then_norm(x, angles, 1e-6), rtol=1e-13)
    assert np.abs(norm_then_rotate(x, angles, 1e-6, gain) - rotate_then_norm(x, angles, 1e-6, gain)).max() > 0.1


def test_nanochat_turns_the_other_way_then_norms():
    """nanochat's q and k as its module hands them over: x·W turned by −p·θ, then RMS-normed."""
    from transformers.models.nanochat.modeling_nanochat import NanoChatAttention, NanoChatRotaryEmbedding
    cfg = transformers.NanoChatConfig(hidden_size=16, num_attention_heads=2, num_hidden_layers=1, vocab_size=50,
                                      intermediate_size=8, rope_parameters=dict(rope_type="default", rope_theta=100.0))
    x = np.random.default_rng(3).normal(size=(9, 16))
    cos_sin = NanoChatRotaryEmbedding(cfg)(torch.zeros(1, dtype=torch.float64), torch.arange(9)[None])
    module, q, k, v = caught(cfg, NanoChatAttention, x, position_embeddings=cos_sin)
    theta, _ = rotary(cfg.rope_parameters, 8, 100.0)
    raw = (x @ module.q_proj.weight.detach().numpy().T).reshape(9, 2, 8).transpose(1, 0, 2)
    angles = np.arange(9)[:, None] * theta[None]
    np.testing.assert_allclose(q, rotate_then_norm(raw, -angles, cfg.rms_norm_eps), rtol=1e-5, atol=1e-6)
    assert np.abs(q - rotate_then_norm(raw, angles, cfg.rms_norm_eps)).max() > 0.1       # not Llama's way


# ---------------------------------------------------------------- K = V

def test_k_eq_v_is_gemma4s_global_layer():
    """Gemma 4's global layer with attention_k_eq_v: its k is x·W_K normed with its gain and turned
    (proportional rotary), its v the same product normed without one, never turned."""
    from transformers.models.gemma4.modeling_gemma4 import Gemma4TextAttention, Gemma4TextRotaryEmbedding
    from transformers.cache_utils import KVSharingDict
    cfg = transformers.Gemma4TextConfig(hidden_size=16, num_attention_heads=2, num_key_value_heads=2, head_dim=8,
                                        global_head_dim=16, num_global_key_value_heads=1, attention_k_eq_v=True,
                                        num_hidden_layers=2, vocab_size=50, intermediate_size=8,
                                        hidden_size_per_layer_input=0,
                                        layer_types=["sliding_attention", "full_attention"])
    x = np.random.default_rng(4).normal(size=(7, 16))
    rope = Gemma4TextRotaryEmbedding(cfg)(torch.zeros(1, dtype=torch.float64), torch.arange(7)[None], "full_attention")
    module, q, k, v = caught(cfg, Gemma4TextAttention, x, layer=1, position_embeddings=rope,
                             shared_kv_states=KVSharingDict())
    assert module.v_proj is None
    theta, factor = rotary(cfg.rope_parameters["full_attention"], 16, 1e6)
    angles = np.arange(7)[:, None] * theta[None]
    ours_k, ours_v = keys_and_values(x, module.k_proj.weight.detach().numpy().T, module.k_norm.weight.detach().numpy(),
                                     cfg.rms_norm_eps, lambda m: turn(m, angles))
    np.testing.assert_allclose(k[0], ours_k, rtol=1e-5, atol=1e-6)                     # its norms are float32
    np.testing.assert_allclose(v[0], ours_v, rtol=1e-5, atol=1e-6)


def test_proportional_rotary_frequencies_are_transformers():
    """Gemma 4's global layers: ⌊f·d/2⌋ pairs turn with θ_i = base^(−2i/d) over the whole head, the
    rest stand still (θ = 0)."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    ropes = {"sliding_attention": dict(rope_type="default", rope_theta=1e4),
             "full_attention": dict(rope_type="proportional", factor=2.0, rope_theta=1e6, partial_rotary_factor=0.25)}
    cfg = transformers.Gemma4TextConfig(head_dim=8, global_head_dim=32, num_hidden_layers=2, rope_parameters=ropes,
                                        layer_types=["sliding_attention", "full_attention"])
    theirs, _ = ROPE_INIT_FUNCTIONS["proportional"](cfg, None, layer_type="full_attention")
    ours, factor = rotary(cfg.rope_parameters["full_attention"], 32, 1e6)
    np.testing.assert_allclose(ours, theirs.double().numpy(), rtol=1e-6)
    assert factor == 1.0 and np.count_nonzero(ours) == 4 and len(ours) == 16


# ---------------------------------------------------------------- shared KV

TYPES = st.lists(st.sampled_from(["sliding_attention", "full_attention"]), min_size=1, max_size=12)


@given(types=TYPES, data=st.data())
def test_sources_are_transformers_sharing_modes(types, data):
    shared = data.draw(st.integers(0, len(types) - 1))
    first = len(types) - shared
    tail_types = set(types[first:])
    if not tail_types <= set(types[:first]):
        with pytest.raises(ValueError):
            sources(types, shared)
        return
    ours = sources(types, shared)
    loop = [i if i < first else max(j for j in range(first) if types[j] == types[i]) for i in range(len(types))]
    assert ours == loop
    if set(types[:first]) == set(types):   # transformers' own check asks for every type among the first
        cfg = transformers.Gemma4TextConfig(num_hidden_layers=len(types), layer_types=list(types),
                                            num_kv_shared_layers=shared)
        if cfg.layer_types == list(types):   # it forces the last layer global; drawn lists that end sliding differ
            modes = cfg.kv_sharing_modes
            assert [m == "reuse" for m in modes] == [s != i for i, s in enumerate(ours)]
            assert set(stores(types, shared)) <= {i for i, m in enumerate(modes) if m == "store"}


def test_sources_of_a_gemma3n_shaped_config():
    """30 layers, every fifth global, the last 10 sharing: each reads layer 18 (sliding) or 19 (global)."""
    cfg = transformers.Gemma3nTextConfig(num_hidden_layers=30, num_kv_shared_layers=10)
    ours = sources(cfg.layer_types, 10)
    assert ours[:20] == list(range(20))
    assert ours[20:] == [19 if t == "full_attention" else 18 for t in cfg.layer_types[20:]]
    assert [m == "reuse" for m in cfg.kv_sharing_modes] == [s != i for i, s in enumerate(ours)]
    assert stores(cfg.layer_types, 10) == [18, 19]
