"""A plain-NumPy self-attention, written apart from `tracer/` (no shared code), to check it.

It works in the scenario's own layout (columns: Q = W_Q·X, S = KᵀQ, softmax down each column)
with einsum and explicit formulas, in float64, and returns every step of CONTRACT §4 by id.
"""
from __future__ import annotations

import math

import numpy as np

# CONTRACT §3, copied by hand from the table (not imported from the package)
PRESETS = {
    "exact": dict(scale="sqrt", base="e", normalize="softmax", stable=True, dtype="float64"),
    "by-hand": dict(scale="floor", base=3.0, normalize="softmax", stable=False, dtype="float64"),
}


def _heads(m) -> list[np.ndarray]:
    """One matrix or a list of matrices (one per head), as float64 arrays."""
    a = np.asarray(m, dtype=np.float64)
    return [a] if a.ndim == 2 else list(a)


def allowed(mask, n: int, columns: bool) -> np.ndarray | None:
    """May-attend booleans in the layout's score orientation (rows: query × key; columns: key × query)."""
    if isinstance(mask, str) and mask == "none":
        return None
    if isinstance(mask, str):  # causal: key index ≤ query index
        key, query = np.indices((n, n)) if columns else np.indices((n, n))[::-1]
        return key <= query
    return np.asarray(mask).astype(bool)


def attention(x, q, k, v=None, o=None, *, layout="rows", mask="none", scale="sqrt", base="e",
              normalize="softmax", stable=True, dtype="float64", v_down=None, v_up=None,
              residual=None) -> dict[str, np.ndarray]:
    """Every step, keyed by its id, as 2-D float64 arrays in the layout's orientation.

    Inputs are written as the layout writes them and are first rounded to `dtype` (so float32
    runs are compared with the exact result of the same float32 inputs). residual: None or a dict
    with "norm" ("layer" | "none") and "eps"."""
    cols = layout == "columns"
    rnd = lambda m: np.asarray(m, dtype=np.float64).astype(dtype).astype(np.float64)  # noqa: E731
    X = rnd(x)
    n = X.shape[1] if cols else X.shape[0]
    out = {"x": X}
    wq = [rnd(m) for m in _heads(q)]
    wk = [rnd(m) for m in _heads(k)]
    ok = allowed(mask, n, cols)
    axis = 0 if cols else 1  # the key axis of a score matrix: softmax runs along it
    zs = []
    for h in range(len(wq)):
        p = f"h{h}."
        if cols:
            Q, K = np.einsum("cd,dn->cn", wq[h], X), np.einsum("cd,dn->cn", wk[h], X)
        else:
            Q, K = np.einsum("nd,dc->nc", X, wq[h]), np.einsum("nd,dc->nc", X, wk[h])
        out[p + "q"], out[p + "k"] = Q, K
        if v_down is not None:
            down, up = rnd(_heads(v_down)[h]), rnd(_heads(v_up)[h])
            Vd = down @ X if cols else X @ down
            out[p + "v_down"] = Vd
            V = up @ Vd if cols else Vd @ up
        else:
            wv = rnd(_heads(v)[h])
            V = wv @ X if cols else X @ wv
        out[p + "v"] = V
        d_k = Q.shape[0] if cols else Q.shape[1]
        # scores: rows S[i, j] = q_i·k_j (query × key); columns S[j, i] = k_j·q_i (key × query)
        S = np.einsum("cj,ci->ji", K, Q) if cols else np.einsum("ic,jc->ij", Q, K)
        out[p + "scores"] = S
        if scale == "sqrt":
            S = S / math.sqrt(d_k)
        elif scale == "floor":
            S = np.floor(S / max(1, round(math.sqrt(d_k))))
        elif scale != "none":
            S = S / float(scale)
        out[p + "scaled"] = S
        if ok is not None:
            S = np.where(ok, S, -np.inf)
            out[p + "masked"] = S
        if normalize == "relu":
            A = np.maximum(S, 0.0)  # −∞ → 0, no normalisation
        else:
            b = math.e if base == "e" else float(base)
            if stable:
                top = S.max(axis=axis, keepdims=True)
                top = np.where(np.isfinite(top), top, 0.0)  # a fully masked query: nothing to shift
            else:
                top = np.zeros_like(S.max(axis=axis, keepdims=True))
            with np.errstate(over="ignore"):
                P = np.power(b, S - top)
            out[p + "exp"] = P
            total = P.sum(axis=axis, keepdims=True)
            out[p + "sums"] = total
            with np.errstate(invalid="ignore", divide="ignore"):
                A = np.where(total > 0, P / np.where(total > 0, total, 1.0), 0.0)
        out[p + "weights"] = A
        # z: rows Z = A·V (query × d_v); columns Z = V·A (d_v × query)
        Z = np.einsum("vj,ji->vi", V, A) if cols else np.einsum("ij,jv->iv", A, V)
        out[p + "z"] = Z
        zs.append(Z)
    y = zs[0]
    if len(zs) > 1:
        y = out["concat"] = np.concatenate(zs, axis=0 if cols else 1)
    if o is not None:
        wo = rnd(o)
        y = out["out"] = wo @ y if cols else y @ wo
    if residual is not None:
        y = out["residual"] = X + y
        if residual.get("norm", "layer") == "layer":
            mean = y.mean(axis=axis, keepdims=True)  # over features, per token
            var = ((y - mean) ** 2).mean(axis=axis, keepdims=True)  # population variance
            out["norm"] = (y - mean) / np.sqrt(var + residual.get("eps", 1e-5))
    return out


def expected_ids(heads: int, *, masked: bool, softmax: bool, low_rank: bool, has_o: bool,
                 residual=None) -> list[str]:
    """The step ids CONTRACT §4 asks for, in computation order."""
    ids = ["x"]
    for h in range(heads):
        p = f"h{h}."
        ids += [p + "q", p + "k"] + ([p + "v_down"] if low_rank else []) + [p + "v", p + "scores", p + "scaled"]
        ids += [p + "masked"] if masked else []
        ids += [p + "exp", p + "sums"] if softmax else []
        ids += [p + "weights", p + "z"]
    ids += ["concat"] if heads > 1 else []
    ids += ["out"] if has_o else []
    if residual is not None:
        ids += ["residual"] + (["norm"] if residual.get("norm", "layer") == "layer" else [])
    return ids


# Tolerances: rtol, and atol as a fraction of the step's largest magnitude (for cancellation).
TOL = {"float64": 1e-12, "float32": 1e-5}
POWERS = ("exp", "sums")  # positive powers: relative error only (they span many decades)


def assert_matches(trace, ref: dict, dtype: str = "float64") -> None:
    """Every step of the trace equals the reference (same ids, same order, same −∞ cells)."""
    ids = [s.id for s in trace.steps]
    assert ids == list(ref), f"step ids {ids} != expected {list(ref)}"
    tol = TOL[dtype]
    for step in trace.steps:
        got, want = np.asarray(trace[step.id]), ref[step.id]
        assert got.dtype == np.dtype(dtype), (step.id, got.dtype)
        assert got.shape == want.shape, (step.id, got.shape, want.shape)
        ninf = np.isneginf(want)
        assert np.array_equal(np.isneginf(got), ninf), f"{step.id}: −∞ cells differ"
        fin = ~ninf
        big = np.abs(want[fin]).max(initial=0.0)
        if step.kind in POWERS:
            atol = 10 * np.finfo(dtype).tiny
        elif step.kind == "norm":  # (r − mean) ÷ √(var + ε) magnifies r's rounding
            r = ref["residual"]
            axis = 0 if trace.layout == "columns" else 1
            atol = tol * max(1.0, np.abs(r).max() / np.sqrt(r.var(axis=axis).min() + trace.scenario.residual["eps"]))
        else:
            atol = tol * max(1.0, big)
        np.testing.assert_allclose(got[fin].astype(np.float64), want[fin], rtol=tol, atol=atol,
                                   err_msg=f"step {step.id}")
