"""[linear]'s keys (tracer/mechanisms/linear/section.py): every written shape of decay and beta spread
to one value a head and token, and each refusal one line naming the key; and the memory figures
(footprint.py) for the published shapes, written here from the models' config.json values."""
from __future__ import annotations

import numpy as np
import pytest

from tracer.errors import ScenarioError
from tracer.mechanisms.linear.footprint import footprint, kv_per_token, latent_per_token
from tracer.mechanisms.linear.section import read_linear


def test_every_shape_of_decay_and_beta_is_spread_per_head_and_token():
    one = read_linear(dict(rule="delta", decay=0.5), heads=2, n=3, d_k=4)
    assert one.alpha.shape == (2, 3, 1) and (one.alpha == 0.5).all() and (one.beta == 1).all() and not one.l2
    per_token = read_linear(dict(rule="delta", decay=[1, 0.5, 0.25], beta=[0, 1, 2], l2=True), 2, 3, 4)
    assert per_token.alpha[1, :, 0].tolist() == [1, 0.5, 0.25] and per_token.beta[0].tolist() == [0, 1, 2]
    per_head = read_linear(dict(rule="decay", decay=[[0.25] * 3, [0.5] * 3]), 2, 3, 4)
    assert per_head.alpha[:, 0, 0].tolist() == [0.25, 0.5] and per_head.beta is None
    channels = read_linear(dict(rule="kda", decay=[[1, 0.5, 1, 1]] * 3), 2, 3, 4)
    assert channels.alpha.shape == (2, 3, 4) and channels.alpha[1, 2].tolist() == [1, 0.5, 1, 1]
    assert read_linear(dict(rule="kda"), 2, 3, 4).alpha.shape == (2, 3, 1)


@pytest.mark.parametrize("section, message", [
    ("delta", "linear: expected a table with rule, decay, beta, l2, got a string"),
    (dict(decay=1), "linear.rule: is missing; expected one of 'delta', 'decay', 'kda'"),
    (dict(rule="gated"), "linear.rule: expected one of 'delta', 'decay', 'kda', got 'gated'"),
    (dict(rule="delta", decay=0), r"linear.decay: expected each in \(0, 1\]: the share of the state that survives a "
                                  "token; got 0"),
    (dict(rule="delta", decay=[1, 1.5, 1]), r"linear.decay: expected each in \(0, 1\].*got 1.5"),
    (dict(rule="delta", beta=-0.5), r"linear.beta: expected each in \[0, 2\].*got -0.5"),
    (dict(rule="kda", beta=[2.5, 1, 1]), r"linear.beta: expected each in \[0, 2\].*got 2.5"),
    (dict(rule="decay", beta=1), "linear.beta: the decay rule adds k·vᵀ and overwrites nothing"),
    (dict(rule="delta", decay=[1, 1]), r"linear.decay: expected a number, a list of 3 \(one a token\) or 2 lists of 3 "
                                       r"\(one a head\), got a list shaped \(2,\)"),
    (dict(rule="kda", decay=[[1, 1]] * 3),
     r"linear.decay: expected .* or 2 lists of 3 lists of 4 \(one a head\), got a list shaped \(3, 2\)"),
    (dict(rule="delta", decay=[1, "x", 1]), "linear.decay: expected numbers, got a string"),
    (dict(rule="delta", beta=[1, True, 1]), "linear.beta: expected numbers, got a boolean"),
    (dict(rule="delta", decay=[[1], [1, 1]]), "linear.decay: expected lists of equal lengths, got a ragged list"),
    (dict(rule="delta", decay=float("nan")), "linear.decay: expected finite numbers, got nan"),
    (dict(rule="delta", l2="yes"), "linear.l2: expected true or false, got a string"),
    (dict(rule="delta", gate=1), "linear.gate: is not a key of \\[linear\\]"),
])
def test_bad_keys_are_refused_in_one_line_naming_them(section, message):
    with pytest.raises(ScenarioError, match=message) as err:
        read_linear(section, heads=2, n=3, d_k=4)
    assert "\n" not in str(err.value)


def test_qwen3_next_keeps_as_many_numbers_as_512_tokens_of_cache():
    """Qwen3-Next-80B-A3B's config.json: linear_num_value_heads 32, linear_key_head_dim 128,
    linear_value_head_dim 128; num_key_value_heads 2, head_dim 256."""
    f = footprint(32, 128, 128, kv_per_token(2, 256))
    assert (f.state, f.per_token, f.break_even) == (524288, 1024, 512)
    assert f.sentence(1000) == ("the state keeps 524 288 numbers whatever the length; a softmax layer's cache grows "
                                "by 1 024 a token: as many at 512 tokens (this text's 1000: 1 024 000 in the cache)")


def test_qwen3_5_small_and_kimi_linear_figures():
    """Qwen3.5-0.8B (text_config: 16 value heads of 128 × 128; 2 key/value heads of 256) breaks even
    at 256 tokens; Kimi-Linear-48B-A3B (32 KDA heads of 128; a latent of 512 and a shared key of 64)
    at 910.2."""
    assert footprint(16, 128, 128, kv_per_token(2, 256)).break_even == 256
    kimi = footprint(32, 128, 128, latent_per_token(512, 64))
    assert kimi.per_token == 576 and "as many at 910.2 tokens" in kimi.sentence()
    with pytest.raises(ValueError, match="kv_heads: expected a whole number ≥ 1, got 0"):
        kv_per_token(0, 256)
    assert np.isclose(footprint(1, 2, 2, 8).break_even, 0.5)
