"""A checked scenario: the input, the weights, the mask and the lesson's words, stored in the rows
orientation (one row per token) that the kernels use, whatever the file's layout."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from .. import mechanisms
from ..errors import as_text
from ..steps.base import Dims


CAST_BYTES = 1 << 28   # weights cast once per scenario up to this size (a GPT-3 layer's are cast per trace)


@dataclass
class Scenario:
    """A checked scenario. Arrays are in the rows orientation: x is n × d_model, w_q is
    heads × d_model × d_k, w_k and w_v are groups × d × d_k (groups = heads unless grouped-query),
    w_o is (heads·d_v) × d_out, biases are one row per head or group, the mask is query × key."""
    name: str
    layout: str
    tokens: list[str]
    x: np.ndarray
    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray | None = None
    w_v_down: np.ndarray | None = None
    w_v_up: np.ndarray | None = None
    w_o: np.ndarray | None = None
    mask: object = "none"                 # "none" | "causal" | bool array (query × key)
    title: str = ""
    description: str = ""
    preset: str = "exact"
    defaults: dict = field(default_factory=dict)
    residual: dict | None = None          # {"norm": "layer" | "none", "eps": float}
    source: str | None = None
    random: dict | None = None
    b_q: np.ndarray | None = None         # heads × d_k
    b_k: np.ndarray | None = None         # groups × d_k
    b_v: np.ndarray | None = None         # groups × d_v
    b_o: np.ndarray | None = None         # 1 × d_out
    v_is_k: bool = False                  # v = "k": the values are the keys
    rope: dict | None = None              # {"base": float, "style": "half" | "interleaved", "offset": int,
    #                                       "scaling": None | {"type": "linear" | "llama3" | "yarn", "factor", …},
    #                                       "dims": None | r (only the first r features of a head rotate)}
    context: np.ndarray | None = None     # M × d_context: cross-attention's keys and values come from here
    context_tokens: list[str] | None = None
    norm_in: dict | None = None           # {"kind": "layer" | "rms", "gain", "bias", "eps"}: before the projections
    features: list[str] | None = None     # names of x's features, where the scenario gives them
    files: tuple = ()                     # the array files the scenario file named (x = "inputs.npy")
    value_features: list[str] | None = None   # names of the values' features (d_v: v's and z's columns)
    model: dict | None = None             # a checkpoint's layer: where it came from (tracer.models.origin)
    decode: int | None = None             # [decode] prompt: the first P tokens at once, then one at a time
    q_norm: np.ndarray | None = None      # QK-norm's gain: heads × d_k (the effective gain: Gemma's 1 + w)
    k_norm: np.ndarray | None = None      # groups × d_k
    qk_norm_eps: float = 1e-6
    qk_norm_scope: str = "head"           # "head": RMS over each head's d_k (Qwen3, Gemma 3); "all": over the
    #                                       whole projected width, every head's q (every group's k) together (OLMo 2)
    qk_norm_kind: str = "rms"             # "rms": with the gains; "l2": weightless (gains of ones; Llama 4, nanochat)
    qk_norm_after_rope: bool = False      # q and k turned first, normed after (nanochat, Llama 4)
    softcap: float | None = None          # C: h.capped = C·tanh(h.scaled / C), before the mask
    alibi: np.ndarray | None = None       # one slope per head: h.biased = h.scaled − m_h·(i − j)
    sinks: np.ndarray | None = None       # one sink logit per head: it joins each query's softmax (gpt-oss)
    out_norm: dict | None = None          # {"kind": "rms", "gain": 1 × d_out, "eps"}: a norm of the attention's
    #                                       output before the residual (residual = x + out_norm)
    mla: dict | None = None               # multi-head latent attention's shared parts (mechanisms/latent): rank,
    #                                       rope, nope, q_rank, w_dkv, w_kr, w_dq, kv_norm, q_norm, eps; then w_q is
    #                                       [W_UQ | W_QR], w_k is W_UK and w_v is W_UV (both read the latent c_kv)
    v_norm: float | None = None           # a gainless RMS norm of the values: its eps (mechanisms/v_norm.py)
    q_temp: dict | None = None            # the query temperature: scale β, floor F, shift o, each token's position
    #                                       (mechanisms/q_temp): q_temp = q·(1 + β·ln(1 + ⌊(p + o)/F⌋))
    shared_kv: dict | None = None         # keys and values of another layer: source (words), readers (heads), x
    #                                       (n × d_model or None: what the source's attention read; mechanisms/kv_sharing)
    score_bias: np.ndarray | None = None  # heads × query × key, added to the scaled scores; −∞ masks (mechanisms/score_bias.py)
    sparse: dict | None = None            # the lightning indexer (mechanisms/indexer/reader.py): topk, scale, its
    #                                       weights or a checkpoint's given parts or a shared choice; the choice
    #                                       hides the other keys from every head
    w_gate: np.ndarray | None = None      # heads × d_model × d_v: the output gate's W_G (mechanisms/output_gate.py)
    b_gate: np.ndarray | None = None      # heads × d_v: its bias
    linear: dict | None = None            # [linear]: {rule, alpha heads×n×(1|d_k), beta heads×n | None, l2} (mechanisms/linear)
    compressed: dict | None = None        # DeepSeek V4's layer: its weights, pooling, indexer, streams, grouped W_O
    #                                       … (mechanisms/compressed/reader.py); its keys are n tokens + E entries

    def __repr__(self) -> str:
        from ..notebook import scenario_repr
        return scenario_repr(self)

    @property
    def groups(self) -> int:
        return self.w_k.shape[0]

    @property
    def m(self) -> int:
        """How many keys: the context's tokens under cross-attention, DeepSeek V4's tokens and entries,
        else the tokens of x."""
        if self.compressed is not None:
            return self.n + self.compressed["entries"]
        return self.n if self.context is None else self.context.shape[0]

    @property
    def key_tokens(self) -> list[str]:
        if self.compressed is not None:   # the tokens, then the entries by number
            return list(self.tokens) + [f"e{e}" for e in range(self.compressed["entries"])]
        return self.tokens if self.context is None else self.context_tokens

    @property
    def n(self) -> int:
        return self.x.shape[0]

    @property
    def d_model(self) -> int:
        return self.x.shape[1]

    @property
    def heads(self) -> int:
        return self.w_q.shape[0]

    @property
    def d_k(self) -> int:
        return self.w_q.shape[2]

    @property
    def d_v(self) -> int:
        return (self.w_v if self.w_v is not None else self.w_v_up).shape[2]

    @property
    def rank(self) -> int | None:
        return None if self.w_v_down is None else self.w_v_down.shape[2]

    @property
    def d_out(self) -> int:
        if self.compressed is not None:   # DeepSeek V4's grouped W_O: W_b's rows
            return len(self.compressed["w_b"])
        return self.w_o.shape[1] if self.w_o is not None else self.heads * self.d_v

    def cast(self, a: np.ndarray, dtype) -> np.ndarray:
        """`a`, one of this scenario's arrays, C-contiguous in `dtype`: made once and kept while it is
        at most CAST_BYTES, since every trace of the scenario in float32 reads the same weights (its
        arrays are not changed after it is built), else made each time it is asked for."""
        dtype = np.dtype(dtype)
        if a.dtype == dtype and a.flags.c_contiguous:
            return a
        return self._kept((id(a), dtype.str), (a,), a.size * dtype.itemsize,
                          lambda: np.ascontiguousarray(a, dtype=dtype))

    def joined(self, arrays: tuple, heads: slice, dtype) -> np.ndarray:
        """Heads `heads` of each of `arrays` (this scenario's, each heads × d × m) side by side: one
        C-contiguous d × (Σ heads·m) array in `dtype`, the weights of one wide product. Every head's
        are kept as cast() keeps its casts; a few heads' (a lazy trace's) are made each time."""
        dtype = np.dtype(dtype)
        parts = [a[heads] for a in arrays]
        every = heads.indices(len(arrays[0])) == (0, len(arrays[0]), 1)
        size = sum(p.size for p in parts) * dtype.itemsize if every else CAST_BYTES + 1   # a few heads: not kept
        return self._kept(("joined", *(id(a) for a in arrays), dtype.str), arrays, size, lambda: np.ascontiguousarray(
            # (NumPy keeps the parts' order: one head of width 1 would come out F-ordered)
            np.concatenate([p.transpose(1, 0, 2).reshape(p.shape[1], -1) for p in parts], axis=1, dtype=dtype)))

    def _kept(self, key: tuple, sources: tuple, size: int, make) -> np.ndarray:
        """make(), kept under `key` when at most CAST_BYTES, its `sources` held beside it so that
        their ids (in the key) stay their own."""
        if size > CAST_BYTES:
            return make()
        casts = self.__dict__.setdefault("_casts", {})
        if key not in casts:
            casts[key] = (sources, make())
        return casts[key][1]

    @functools.cached_property
    def largest(self) -> dict[str, float]:
        """Each input's largest magnitude, by field name (checked once against a narrower dtype)."""
        arrays = {"x": self.x, "weights.q": self.w_q, "weights.k": self.w_k, "weights.v": self.w_v,
                  "weights.v_down": self.w_v_down, "weights.v_up": self.w_v_up, "weights.o": self.w_o,
                  "weights.bq": self.b_q, "weights.bk": self.b_k, "weights.bv": self.b_v, "weights.bo": self.b_o,
                  "context": self.context, **mechanisms.arrays(self)}
        return {name: float(max(a.max(), -a.min())) for name, a in arrays.items() if a is not None and a.size}

    @functools.cached_property
    def exact(self) -> bool:
        """Whether every input is a small fraction as typed, so that rational arithmetic gives
        exact results (a worksheet); random and learned weights are not."""
        from ..printing import exact_values
        if self.random is not None:
            return False
        norm = self.norm_in or {}
        return exact_values(self.x, self.w_q, self.w_k, self.w_v, self.w_v_down, self.w_v_up, self.w_o,
                            self.b_q, self.b_k, self.b_v, self.b_o, self.context, norm.get("gain"), norm.get("bias"),
                            *mechanisms.arrays(self).values())

    def dims(self) -> Dims:
        """The sizes and switches a plan (and so a memory estimate) depends on (computed once:
        a scenario's arrays are not changed after it is built)."""
        got = self.__dict__.get("_dims")
        if got is None:
            got = self.__dict__["_dims"] = self._dims()
        return got

    def _dims(self) -> Dims:
        return Dims(n=self.n, d_model=self.d_model, heads=self.heads, d_k=self.d_k, d_v=self.d_v,
                    d_out=self.d_out, rank=self.rank or 0, output=self.w_o is not None,
                    residual=None if self.residual is None else self.residual["norm"],
                    m=self.m, groups=self.groups, d_context=None if self.context is None else self.context.shape[1],
                    norm_in=self.norm_in is not None, prompt=self.decode,
                    norm_kind=self.norm_in["kind"] if self.norm_in else "layer", v_is_k=self.v_is_k,
                    biases=frozenset(k for k, b in (("q", self.b_q), ("k", self.b_k), ("v", self.b_v),
                                                    ("o", self.b_o)) if b is not None),
                    parts=mechanisms.dims(self))

    def describe(self) -> dict:
        """What the exports write about the scenario: its shape, the mechanisms told with it (its
        positions), its inputs, then the other mechanisms (each in its module's words)."""
        mask = self.mask if isinstance(self.mask, str) else "explicit"
        out = dict(name=self.name, title=self.title, description=self.description,
                   tokens=list(self.tokens), layout=self.layout, heads=self.heads, n=self.n,
                   d_model=self.d_model, d_k=self.d_k, d_v=self.d_v, d_out=self.d_out, mask=mask,
                   residual=self.residual, source=None if self.source is None else as_text(self.source))
        if self.rank is not None:
            out["rank"] = self.rank
        if self.groups != self.heads:
            out["groups"] = self.groups
        early, late = mechanisms.described(self)
        out.update(early)
        if self.context is not None:
            out.update(m=self.m, context_tokens=list(self.context_tokens))
        if self.decode is not None:
            out["decode"] = {"prompt": self.decode}
        if self.norm_in is not None:
            out["norm_in"] = {"kind": self.norm_in["kind"], "eps": self.norm_in["eps"]}
        out.update(late)
        return out

    def cache_per_token(self) -> dict[str, int]:
        """Numbers one token adds to this layer's KV cache, as it is and under MHA, GQA and MQA of
        the same heads and head width (mechanisms/latent)."""
        from ..mechanisms.latent.compute import cache_sizes
        return cache_sizes(self)
