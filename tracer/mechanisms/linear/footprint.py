"""What a layer keeps between tokens while it generates: a linear layer its state, heads·d_k·d_v
numbers whatever the length; a softmax layer its KV cache, 2·kv_heads·d_h numbers for every token
so far. The length at which the two are equal is where linear attention starts to pay."""
from __future__ import annotations

from typing import NamedTuple


class Footprint(NamedTuple):
    state: int          # numbers a linear layer keeps (per sequence)
    per_token: int      # numbers a softmax layer's cache grows by with each token
    break_even: float   # tokens at which the cache holds as many numbers as the state

    def cache(self, tokens: int) -> int:
        return self.per_token * tokens

    def sentence(self, tokens: int | None = None) -> str:
        """What `show` and the TUI say: "the state keeps 524 288 numbers whatever the length; a
        softmax layer's cache grows by 1 024 a token: as many at 512 tokens"."""
        even = int(self.break_even) if float(self.break_even).is_integer() else round(self.break_even, 1)
        text = (f"the state keeps {_grouped(self.state)} numbers whatever the length; a softmax layer's cache "
                f"grows by {_grouped(self.per_token)} a token: as many at {_grouped(even)} token{'' if even == 1 else 's'}")
        if tokens is not None:
            text += f" (this text's {tokens}: {_grouped(self.cache(tokens))} in the cache)"
        return text


def _grouped(x) -> str:
    return f"{x:,}".replace(",", " ")


def kv_per_token(kv_heads: int, d_h: int) -> int:
    """A softmax layer's cache grows by a key and a value per key/value head with each token."""
    return 2 * _whole("kv_heads", kv_heads) * _whole("d_h", d_h)


def latent_per_token(rank: int, rope: int) -> int:
    """A latent attention layer's cache (DeepSeek, Kimi) grows by the latent and the shared key."""
    return _whole("rank", rank) + _whole("rope", rope)


def footprint(heads: int, d_k: int, d_v: int, per_token: int) -> Footprint:
    """A linear layer of `heads` value heads (a d_k × d_v state each) against a softmax layer whose
    cache grows by `per_token` numbers a token (kv_per_token, latent_per_token). A model's short
    convolution keeps K − 1 more inputs a channel, a few thousand numbers: not counted here."""
    state = _whole("heads", heads) * _whole("d_k", d_k) * _whole("d_v", d_v)
    return Footprint(state, _whole("per_token", per_token), state / per_token)


def _whole(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: expected a whole number ≥ 1, got {value!r}")
    return value
