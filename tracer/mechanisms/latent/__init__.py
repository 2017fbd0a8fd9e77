"""Multi-head latent attention (DeepSeek-V2/V3, Kimi K2): every token squeezed into one small latent
c_kv from which each head rebuilds its keys and values, positions in one shared rotary key k_pe; a
decoder caches only those two. Its parts:

    reader.py      the scenario file's [mla] section
    steps.py       its steps (c_q, c_kv, k_pe, q_nope, q_pe, k_nope, the absorbed form, the caches)
    compute.py     its numbers: the latents, a head's parts, the absorbed scores, the cache sizes, decode
    given.py       its matrices as the exports give them and the panels name them
    checkpoint.py  DeepSeek's config.json sizes (the tensors: models/deepseek.py)"""
from __future__ import annotations

from ..declaration import Mechanism
from . import steps  # noqa: F401  (registers its kinds)
from .compute import cache_per_token
from .given import SYMBOLS, factor, gains, projections

ARRAYS = (("down", "w_dkv"), ("rope_k", "w_kr"), ("q_down", "w_dq"), ("kv_norm", "kv_norm"), ("q_norm", "q_norm"))


def arrays(sc) -> dict:
    """[mla]'s shared arrays by name (the heads' are w_q, w_k and w_v)."""
    m = sc.mla
    return {f"mla.{key}": m[name] for key, name in ARRAYS if m.get(name) is not None}


def dims(sc) -> tuple:
    m = sc.mla
    return m["rank"], m["rope"], m["nope"], m["q_rank"] or 0, m["kv_norm"] is not None, m["q_norm"] is not None


def describe(sc) -> dict:
    m = sc.mla
    return dict(rank=m["rank"], rope=m["rope"], nope=m["nope"], q_rank=m["q_rank"], kv_norm=m["kv_norm"] is not None,
                q_norm=m["q_norm"] is not None, eps=m["eps"], cache_per_token=sc.cache_per_token())


def said(arrays: dict) -> str | None:
    """A checkpoint layer's latent attention in words: what its cache keeps, against multi-head attention's."""
    if "mla" not in arrays:
        return None
    m, heads = arrays["mla"], len(arrays["mla"]["up_v"])
    rank, rope, d_v = m["down"].shape[1], m["rope_k"].shape[1], m["up_v"][0].shape[1]
    sizes = cache_per_token(heads, d_v, 1, rank, rope)
    return (f"its attention is latent: c_kv ({rank} numbers a token) and k_pe ({rope}) are all its KV cache "
            f"keeps, {sizes['MLA']} numbers a token where multi-head attention's keys and values would be "
            f"{sizes['MHA']}; each head's absorbed step reads its scores straight from them")


DECLARATION = Mechanism(
    "latent", "latent attention", field="mla", label="[mla]", keys=("mla",), arguments={"mla": "mla"}, dims=dims, arrays=arrays,
    describe=describe, describe_key="mla", projections=projections, given=gains, symbols=SYMBOLS, factor=factor,
    fused=False, online=False, said=said)
