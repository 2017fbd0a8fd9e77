"""`tracer.sdpa`: PyTorch's scaled_dot_product_attention on ready queries, keys and values, with
its shapes and semantics, every batch element traced by attnsim.

q is (…, H, L, E), k (…, H_kv, S, E), v (…, H_kv, S, Ev): the leading dimensions broadcast as
PyTorch broadcasts them; with enable_gqa query head h reads key/value head h // (H / H_kv) (PyTorch's
repeat_interleave, attnsim's group order). A boolean mask says True = may attend; a float mask is
added to the scaled scores (attnsim's additive mask, mechanisms/score_bias.py), −inf hiding the key.
A batch element's trace is a scenario whose x (and, when L ≠ S, context) holds each head's q, k
and v side by side, and whose W_Q, W_K, W_V pick one head's columns: its q, k, v steps are the
given ones exactly (a product with 0s and a single 1)."""
from __future__ import annotations

import warnings

import numpy as np

from .anyarray import as_numpy
from .errors import AttentionWarning, ScenarioError


class SDPA:
    """What `sdpa` returns: `.output` (…, H, L, Ev), `.weights` (…, H, L, S), `.trace(*batch)`."""

    def __init__(self, parts, arithmetic: str, overrides: dict):
        self._parts, self._arithmetic, self._overrides = parts, arithmetic, overrides
        q, heads = parts["q"], parts["q"].shape[-3]
        self.batch_shape = q.shape[:-3]
        self._last = None
        output = weights = None
        for index in np.ndindex(*self.batch_shape):   # one trace at a time: a large batch is never held whole
            trace = self._run(index)
            if output is None:   # in the trace's dtype (float64 under exact)
                output = np.empty((*q.shape[:-1], parts["v"].shape[-1]), trace.dtype)
                weights = np.empty((*q.shape[:-1], parts["k"].shape[-2]), trace.dtype)
            output[index] = [trace[f"h{h}.z"] for h in range(heads)]
            weights[index] = [trace[f"h{h}.weights"] for h in range(heads)]
        self.output, self.weights = (a.reshape(parts["shape"] + a.shape[-2:]) for a in (output, weights))

    def trace(self, *batch: int):
        """The attnsim Trace of one batch element (its indices, as many as the batch dimensions)."""
        shape = self.batch_shape
        if len(batch) != len(shape) or not all(isinstance(i, (int, np.integer)) and -s <= i < s
                                                for i, s in zip(batch, shape)):
            raise ScenarioError("batch", f"expected {len(shape)} ind{'ex' if len(shape) == 1 else 'ices'} within "
                                f"{tuple(shape)} (the dimensions before H, L, E), got {tuple(batch)}")
        return self._run(tuple(int(i) % s for i, s in zip(batch, shape)))

    def _run(self, index: tuple):
        if self._last is None or self._last[0] != index:
            from .trace import run
            with warnings.catch_warnings():   # a query with no key: zero weights, as PyTorch; said on the trace
                warnings.simplefilter("ignore", AttentionWarning)
                self._last = index, run(_scenario(self._parts, index), self._arithmetic, **self._overrides)
        return self._last[1]


def sdpa(q, k, v, mask=None, is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False,
         arithmetic: str = "exact", *, attn_mask=None, dropout_p: float = 0.0, **overrides) -> SDPA:
    """torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=…,
    scale=…, enable_gqa=…), traced: any arrays (NumPy, CPU tensors, __array__, __dlpack__);
    `arithmetic` a preset and `overrides` its keys (dtype="float32", …). `attn_mask` is taken
    for PyTorch's name of `mask`; dropout is not traced (dropout_p must be 0)."""
    if attn_mask is not None:
        if mask is not None:
            raise ScenarioError("attn_mask", "expected mask or attn_mask (the same thing), not both")
        mask = attn_mask
    if dropout_p:
        raise ScenarioError("dropout_p", f"expected 0 (a trace is deterministic; dropout is training's), got {dropout_p}")
    if scale is not None:
        if "scale" in overrides or isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0:
            raise ScenarioError("scale", f"expected one number > 0 (what the scores are multiplied by), got {scale!r}")
        overrides["scale"] = 1.0 / float(scale)
    parts = _shapes(_array(q, "q"), _array(k, "k"), _array(v, "v"), bool(enable_gqa))
    parts["mask"] = None if mask is None else _mask(as_numpy(mask, "mask"), parts)
    if is_causal and mask is not None:
        raise ScenarioError("is_causal", "expected either a mask or is_causal=True, not both (as PyTorch)")
    parts["causal"] = bool(is_causal)
    return SDPA(parts, arithmetic, overrides)


def _array(value, name: str) -> np.ndarray:
    a = as_numpy(value, name)
    if a.dtype.kind not in "iuf" or a.ndim < 2 or 0 in a.shape:
        raise ScenarioError(name, f"expected a non-empty array of numbers with at least 2 dimensions (…, L, E), "
                            f"got shape {a.shape} and dtype {a.dtype}")
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        raise ScenarioError(f"{name}[{', '.join(map(str, np.argwhere(~np.isfinite(a))[0]))}]", "expected a finite number")
    return a


def _shapes(q, k, v, gqa: bool) -> dict:
    """q as (batch…, H, L, E), k and v as (batch…, G, S, ·), broadcast as PyTorch does."""
    if q.shape[-1] != k.shape[-1]:
        raise ScenarioError("k", f"expected E = {q.shape[-1]} features like q (its last dimension), got {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ScenarioError("v", f"expected S = {k.shape[-2]} keys like k (its next-to-last dimension), got {v.shape[-2]}")
    flat = q.ndim == k.ndim == v.ndim == 2
    q, k, v = (a if a.ndim > 2 else a[None] for a in (q, k, v))   # (L, E): one head
    if gqa and (k.shape[-3] != v.shape[-3] or q.shape[-3] % k.shape[-3]):
        raise ScenarioError("k", f"expected with enable_gqa a number of key/value heads that divides the "
                            f"{q.shape[-3]} query heads, got {k.shape[-3]} (k) and {v.shape[-3]} (v)")
    try:
        batch = np.broadcast_shapes(q.shape[:-3], k.shape[:-3], v.shape[:-3])
        heads = q.shape[-3] if gqa else np.broadcast_shapes(q.shape[-3:-2], k.shape[-3:-2], v.shape[-3:-2])[0]
    except ValueError:
        raise ScenarioError("k", f"expected shapes that broadcast: q {q.shape}, k {k.shape}, v {v.shape} (…, heads, "
                            "L or S, E); key/value heads fewer than the query heads need enable_gqa=True") from None
    groups = k.shape[-3] if gqa else 1 if k.shape[-3] == v.shape[-3] == 1 else heads
    shape = (*batch, heads)
    return {"q": np.broadcast_to(q, (*shape, *q.shape[-2:])),
            "k": np.broadcast_to(k, (*batch, groups, *k.shape[-2:])),
            "v": np.broadcast_to(v, (*batch, groups, *v.shape[-2:])),
            "shape": () if flat else shape}


def _mask(m: np.ndarray, parts: dict) -> np.ndarray:
    """The mask broadcast to (batch…, H, L, S): booleans, or floats (−inf hides, +inf and NaN refused)."""
    q, k = parts["q"], parts["k"]
    want = (*q.shape[:-1], k.shape[-2])
    if m.dtype.kind not in "bf":
        raise ScenarioError("mask", f"expected booleans (True = may attend) or floats (added to the scaled scores), "
                            f"got dtype {m.dtype}")
    try:
        if np.broadcast_shapes(m.shape, want) != want:
            raise ValueError
    except ValueError:
        raise ScenarioError("mask", f"expected a shape that broadcasts to {want} (…, H, L, S), got {m.shape}") from None
    if m.dtype.kind == "f" and (np.isnan(m) | (m == np.inf)).any():
        at = np.argwhere(np.isnan(m) | (m == np.inf))[0]
        raise ScenarioError(f"mask[{', '.join(map(str, at))}]", f"expected a number or -inf (hides the key), got {m[tuple(at)]}")
    return np.broadcast_to(m, want)


def _scenario(parts: dict, index: tuple):
    """Batch element `index` as a scenario: each head's q (and k, v) side by side in x (k and v in
    the context when L ≠ S), and W_Q, W_K, W_V that select one head's columns."""
    from .scenario import from_arrays
    q, k, v = (parts[name][index] for name in ("q", "k", "v"))   # H × L × E, G × S × E, G × S × Ev
    heads, groups, (L, E), (S, Ev) = q.shape[0], k.shape[0], q.shape[1:], v.shape[1:]
    queries, keys = np.hstack(list(q)), np.hstack([*k, *v])

    def pick(offset: int, count: int, size: int, source: int) -> list[np.ndarray]:
        """count matrices source × size, each a 1 on the diagonal of its head's columns."""
        out = []
        for h in range(count):
            w = np.zeros((source, size))
            w[offset + h * size + np.arange(size), np.arange(size)] = 1.0
            out.append(w)
        return out
    if L == S:   # self-attention: the keys sit beside the queries in x
        x, where, extra = np.hstack([queries, keys]), queries.shape[1], {}
        source = x.shape[1]
    else:        # cross-attention: the keys and values are the context
        x, where, extra = queries, 0, dict(context=keys, context_tokens=[f"s{j}" for j in range(S)])
        source = keys.shape[1]
    given = dict(q=pick(0, heads, E, x.shape[1]), k=pick(where, groups, E, source),
                 v=pick(where + groups * E, groups, Ev, source), **extra)
    mask, bias = _element_mask(parts, index, heads)
    at = f" {list(index)}" if index else ""
    return from_arrays(x, **given, mask=mask, score_bias=bias, tokens=[f"t{i}" for i in range(L)], name="sdpa",
                       title=f"scaled_dot_product_attention{at}",
                       description="q, k and v as given: x holds each head's queries (then keys and values) side by "
                                   "side, and W_Q, W_K, W_V pick one head's columns.")


def _element_mask(parts: dict, index: tuple, heads: int):
    """(mask, score_bias) of one batch element: causal, a 0/1 matrix shared by the heads, or an
    additive mask per head (floats, or booleans that differ from head to head)."""
    if parts["causal"]:
        return "causal", None
    m = parts["mask"]
    if m is None:
        return None, None
    m = m[index]   # H × L × S
    if m.dtype == bool:
        if (m == m[:1]).all():
            return (None if m.all() else m[0]), None
        return None, np.where(m, 0.0, -np.inf)
    return None, np.asarray(m, dtype=np.float64)
