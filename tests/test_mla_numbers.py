"""The absorbed form of latent attention's scores against the rebuilt keys, on generated shapes."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from tracer.mechanisms.latent.compute import absorbed_scores, cache_per_token, rebuilt_scores


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 6), rank=st.integers(1, 5), nope=st.integers(1, 5), seed=st.integers(0, 2**31))
def test_absorbed_equals_rebuilt(n, rank, nope, seed):
    rng = np.random.default_rng(seed)
    q, w_uk, c = rng.integers(-3, 4, (n, nope)), rng.integers(-3, 4, (rank, nope)), rng.integers(-3, 4, (n, rank))
    want = np.array([[sum(q[i, d] * sum(c[j, r] * w_uk[r, d] for r in range(rank)) for d in range(nope))
                      for j in range(n)] for i in range(n)])
    assert (absorbed_scores(q, w_uk, c) == want).all() and (rebuilt_scores(q, w_uk, c) == want).all()


@settings(max_examples=25, deadline=None)
@given(h=st.integers(1, 64), d=st.integers(1, 256), g=st.integers(1, 64), rank=st.integers(1, 1024),
       rope=st.integers(1, 128))
def test_cache_formula(h, d, g, rank, rope):
    sizes = cache_per_token(h, d, g, rank, rope)
    assert sizes == dict(MHA=2 * h * d, GQA=2 * g * d, MQA=2 * d, MLA=rank + rope)
