"""One cell's story: which numbers it came from and the arithmetic that made it, as text
(`scores[k2, q3] = k2·q3 = 2×0 + 1×1 + 0×2 = 1`), and the cells it came from, for highlighting."""
from __future__ import annotations

import math

from .numbers import fmt, fmt_approx, tolerance

MAX_TERMS = 8  # a dot product of 768 terms is summarised after this many


def _cell_names(trace, step, i: int, j: int) -> tuple[str, str]:
    """Names of a cell's row and column in the rows orientation: q3, k2, x1, or an index."""
    def name(axis, index):
        if axis == "query":
            return f"q{index + 1}"
        if axis == "key":
            return f"k{index + 1}"
        if axis == "token":
            return trace.scenario.tokens[index]
        return str(index)
    axes = step.axes[::-1] if trace.columns else step.axes
    return name(axes[0], i), name(axes[1], j)


def _label(trace, step, i: int, j: int) -> str:
    a, b = _cell_names(trace, step, i, j)
    if step.kind == "sums":
        return f"{step.id}[{a}]"
    return f"{step.id}[{b}, {a}]" if trace.columns else f"{step.id}[{a}, {b}]"


def _dot(xs, ys, f) -> str:
    terms = [f"{f(a)}×{f(b)}" for a, b in zip(xs[:MAX_TERMS], ys[:MAX_TERMS])]
    more = len(xs) - MAX_TERMS
    return " + ".join(terms) + (f" + … ({more} more terms)" if more > 0 else "")


def _project(trace, step, i, j, left, w, w_name, left_name, f) -> str:
    """A projection cell: a row of the left factor times a column of W (transposed for columns)."""
    row, col = left[i], w[:, j]
    if trace.columns:  # W·X: a row of W times a column of X
        return f"= {w_name}[{j}, :]·{left_name} = {_dot(col, row, f)}"
    return f"= {left_name}·{w_name}[:, {j}] = {_dot(row, col, f)}"


def rational(arithmetic, d_k: int) -> bool:
    """Whether this arithmetic keeps rational inputs rational (÷2, 3ˣ: yes; ÷√3, eˣ: no).
    Under irrational arithmetic a value near a small fraction is a coincidence, not a fraction."""
    if arithmetic.normalize == "softmax" and arithmetic.softmax_base == "e":
        return False
    return arithmetic.scale != "sqrt" or math.isqrt(d_k) ** 2 == d_k


def explain(trace, step_id: str, row: int, col: int, fractions: bool = True) -> str:
    step = trace.step(step_id)
    rows, cols = step.shape
    if not (0 <= row < rows and 0 <= col < cols):
        from .errors import ScenarioError
        raise ScenarioError("cell", f"expected row < {rows} and column < {cols} for {step_id}, got ({row}, {col})")
    i, j = (col, row) if trace.columns else (row, col)
    a = trace.rows(step_id)
    value = a[i, j]
    tol = tolerance(trace.dtype)
    fractions = fractions and rational(trace.arithmetic, trace.scenario.d_k)
    f = lambda v: fmt(v, fractions, tol=tol)          # noqa: E731
    fa = lambda v: fmt_approx(v, fractions, tol=tol)  # noqa: E731
    h, p = step.head, f"h{step.head}."
    ar, sc = trace.arithmetic, trace.scenario
    label = _label(trace, step, i, j)
    kind = step.kind
    qname, kname = _cell_names(trace, step, i, j) if kind in ("scores", "scaled", "masked", "exp", "weights") else ("", "")

    if kind == "x":
        body = f"= {f(value)}   (input: token {sc.tokens[i]}, feature {j})"
    elif kind in ("q", "k", "v_down") or (kind == "v" and sc.rank is None):
        w = {"q": sc.w_q, "k": sc.w_k, "v_down": sc.w_v_down, "v": sc.w_v}[kind][h]
        wn = {"q": "W_Q", "k": "W_K", "v_down": "W_V↓", "v": "W_V"}[kind]
        body = _project(trace, step, i, j, trace.rows("x"), w, wn, sc.tokens[i], f) + f" = {f(value)}"
    elif kind == "v":
        body = _project(trace, step, i, j, trace.rows(p + "v_down"), sc.w_v_up[h], "W_V↑",
                        f"v↓({sc.tokens[i]})", f) + f" = {f(value)}"
    elif kind == "scores":
        q, k = trace.rows(p + "q")[i], trace.rows(p + "k")[j]
        pair = f"{kname}·{qname} = {_dot(k, q, f)}" if trace.columns else f"{qname}·{kname} = {_dot(q, k, f)}"
        body = f"= {pair} = {f(value)}"
    elif kind == "scaled":
        s, c = trace.rows(p + "scores")[i, j], ar.scale_divisor(sc.d_k)
        if ar.scale == "floor":
            body = f"= ⌊{f(s)} ÷ {c:g}⌋ = {f(value)}"
        elif ar.scale == "sqrt":
            body = f"= {f(s)} ÷ √{sc.d_k} = {f(s)} ÷ {c:.4g} = {f(value)}"
        elif c is None:
            body = f"= {f(s)}   (not scaled)"
        else:
            body = f"= {f(s)} ÷ {c:g} = {f(value)}"
    elif kind == "masked":
        s = trace.rows(p + "scaled")[i, j]
        if trace.allowed[i, j]:
            body = f"= {f(s)}   (query {sc.tokens[i]} may see key {sc.tokens[j]})"
        else:
            why = "comes after" if (isinstance(sc.mask, str) or j > i) else "is hidden from"
            body = f"= −∞   (key {sc.tokens[j]} {why} query {sc.tokens[i]}: masked)"
    elif kind == "exp":
        src = trace.rows(step.inputs[0])
        s = src[i, j]
        base = "e" if ar.softmax_base == "e" else f"{ar.base:g}"
        if ar.stable:
            row = src[i]
            m = row.max() if (row > -math.inf).any() else 0.0
            body = (f"= {base}^({f(s)} − {f(m)}) = {base}^{f(s - m)} = {fa(value)}   "
                    f"({f(m)} is {qname}'s largest score)")
        else:
            body = f"= {base}^{f(s)} = {fa(value)}"
    elif kind == "sums":
        e = trace.rows(p + "exp")[i]
        shown = " + ".join(f(v) for v in e[:MAX_TERMS]) + (f" + … ({len(e) - MAX_TERMS} more)" if len(e) > MAX_TERMS else "")
        body = f"= {shown} = {fa(value)}"
    elif kind == "weights":
        if ar.normalize == "relu":
            s = trace.rows(step.inputs[0])[i, j]
            body = f"= max(0, {f(s)}) = {f(value)}"
        else:
            e, total = trace.rows(p + "exp")[i, j], trace.rows(p + "sums")[i, 0]
            if total == 0:
                body = "= 0   (every key is masked for this query)"
            else:
                body = f"= {f(e)} ÷ {f(total)} = {fa(value)}"
                body += f"   (how much {qname} attends to {kname})"
    elif kind == "z":
        w, v = trace.rows(p + "weights")[i], trace.rows(p + "v")[:, j]
        if trace.columns:
            body = f"= Σ v[{j}, k]·A[k, {sc.tokens[i]}] = {_dot(v, w, f)} = {fa(value)}"
        else:
            body = f"= Σ A[{sc.tokens[i]}, k]·v[k, {j}] = {_dot(w, v, f)} = {fa(value)}"
    elif kind == "concat":
        d_v = sc.d_v
        body = f"= h{j // d_v}.z[{sc.tokens[i]}, {j % d_v}] = {f(value)}"
    elif kind == "out":
        src = step.inputs[0]
        body = _project(trace, step, i, j, trace.rows(src), sc.w_o, "W_O", f"{src}({sc.tokens[i]})", f) + f" = {f(value)}"
    elif kind == "residual":
        other = trace.rows(step.inputs[1])[i, j]
        body = f"= x + {step.inputs[1]} = {f(trace.rows('x')[i, j])} + {f(other)} = {f(value)}"
    else:  # norm
        r = trace.rows("residual")[i]
        mean, var = r.mean(), r.var()
        body = (f"= ({f(r[j])} − {mean:.4g}) ÷ √({var:.4g} + {sc.residual['eps']:g}) = {value:.4g}"
                "   (mean and variance of this token's row)").replace("-", "−")
    return f"{label} {body}"


def sources(trace, step_id: str, row: int, col: int) -> dict[str, list[tuple[int, int]]]:
    """The cells each input step contributed to one cell, in the layout's (row, col)."""
    step = trace.step(step_id)
    i, j = (col, row) if trace.columns else (row, col)
    n = trace.scenario.n
    out: dict[str, list[tuple[int, int]]] = {}

    def put(sid, cells):  # cells in the rows orientation
        out[sid] = [(c, r) for r, c in cells] if trace.columns else list(cells)

    shape = lambda sid: trace.step(sid).shape[::-1] if trace.columns else trace.step(sid).shape  # noqa: E731
    kind = step.kind
    if kind in ("q", "k", "v", "v_down", "out"):
        src = step.inputs[0]
        put(src, [(i, m) for m in range(shape(src)[1])])
    elif kind == "scores":
        p = f"h{step.head}."
        put(p + "q", [(i, m) for m in range(shape(p + "q")[1])])
        put(p + "k", [(j, m) for m in range(shape(p + "k")[1])])
    elif kind in ("scaled", "masked", "exp") or (kind == "weights" and len(step.inputs) == 1):
        put(step.inputs[0], [(i, j)])
    elif kind == "sums":
        put(step.inputs[0], [(i, m) for m in range(n)])
    elif kind == "weights":
        put(step.inputs[0], [(i, j)])
        put(step.inputs[1], [(i, 0)])
    elif kind == "z":
        p = f"h{step.head}."
        put(p + "weights", [(i, m) for m in range(n)])
        put(p + "v", [(m, j) for m in range(n)])
    elif kind == "concat":
        d_v = trace.scenario.d_v
        put(f"h{j // d_v}.z", [(i, j % d_v)])
    elif kind == "residual":
        put("x", [(i, j)])
        put(step.inputs[1], [(i, j)])
    elif kind == "norm":
        put("residual", [(i, m) for m in range(shape("residual")[1])])
    return out
