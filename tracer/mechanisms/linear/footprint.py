"""What a layer keeps between tokens while it generates: a linear layer its state, heads·d_k·d_v
numbers whatever the length; a softmax layer its KV cache, 2·kv_heads·d_h numbers for every token
so far. The length at which the two are equal is where linear attention starts to pay."""
from __future__ import annotations

import math
from typing import NamedTuple


class Footprint(NamedTuple):
    state: int          # numbers a linear layer keeps (per sequence)
    per_token: int      # numbers a softmax layer's cache grows by with each token
    break_even: float   # tokens at which the cache holds as many numbers as the state

    def cache(self, tokens: int) -> int:
        return self.per_token * tokens

    def sentence(self, tokens: int | None = None) -> str:
        """What `show` and the TUI say, e.g. "the state keeps 524 288 numbers whatever the length; a
        softmax layer's KV cache 1 024 a token: as many at 512 tokens"."""
        equal = f"{self.break_even:g}" if self.break_even != math.floor(self.break_even) else f"{int(self.break_even):,}"
        text = (f"the state keeps {self.state:,} numbers whatever the length; a softmax layer's KV cache "
                f"{self.per_token:,} a token: as many at {equal} tokens").replace(",", "\u202f")
        if tokens is not None:
            text += f" (at this text's {tokens}: {self.cache(tokens):,} in the cache)".replace(",", "\u202f")
        return text


def footprint(heads: int, d_k: int, d_v: int, kv_heads: int, d_h: int) -> Footprint:
    """A linear layer of `heads` value heads (d_k × d_v each) against a softmax layer with `kv_heads`
    key/value heads of d_h: keys and values, one vector each a token and head. (A model's short
    convolution keeps K − 1 more inputs, a few thousand numbers; not counted here.)"""
    for name, value in (("heads", heads), ("d_k", d_k), ("d_v", d_v), ("kv_heads", kv_heads), ("d_h", d_h)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a whole number ≥ 1, got {value!r}")
    state, per_token = heads * d_k * d_v, 2 * kv_heads * d_h
    return Footprint(state, per_token, state / per_token)
