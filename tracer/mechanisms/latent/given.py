"""Latent attention's inputs as the exports give them and the panels name them: [mla]'s matrices
under their file names (mla.down, mla.up_k[h], …), and the matrix each latent step multiplies by."""
from __future__ import annotations

import numpy as np

SYMBOLS = {"mla.down": "W_DKV", "mla.rope_k": "W_KR", "mla.q_down": "W_DQ", "mla.up_k": "W_UK", "mla.up_v": "W_UV",
           "mla.q": "W_UQ", "mla.rope_q": "W_QR", "mla.kv_norm": "c_kv's gain", "mla.q_norm": "c_q's gain"}
FACTORS = {"c_kv": "down", "c_q": "q_down", "k_pe": "rope_k", "q_nope": "q", "q_pe": "rope_q",
           "k_nope": "up_k", "v": "up_v", "q_latent": "up_k"}   # [mla]'s weight each step multiplies by


def projections(trace) -> list[tuple[str, tuple[str, str], np.ndarray]]:
    """[mla]'s matrices in the trace's layout (the layer's W_Q, W_K and W_V are made of them), then
    W_O and its bias."""
    sc, m, out = trace.scenario, trace.scenario.mla, []
    nope, src = m["nope"], "q_rank" if m["q_rank"] else "d_model"
    orient = (lambda a, axes: (a.T, axes[::-1])) if trace.columns else (lambda a, axes: (a, axes))  # noqa: E731
    for name, a, axes in (("down", m["w_dkv"], ("d_model", "rank")), ("rope_k", m["w_kr"], ("d_model", "rope")),
                          ("q_down", m["w_dq"], ("d_model", "q_rank"))):
        if a is not None:
            out.append((f"mla.{name}", *reversed(orient(a, axes))))
    for name, mats, axes in (("up_k", sc.w_k, ("rank", "nope")), ("up_v", sc.w_v, ("rank", "d_v")),
                             ("q", sc.w_q[:, :, :nope], (src, "nope")), ("rope_q", sc.w_q[:, :, nope:], (src, "rope"))):
        out += [(f"mla.{name}[{h}]", *reversed(orient(mats[h], axes))) for h in range(sc.heads)]
    if sc.w_o is not None:
        out.append(("weights.o", ("d_out", "heads·d_v") if trace.columns else ("heads·d_v", "d_out"), trace.weight("o")))
    if sc.b_o is not None:
        out.append(("weights.bo", ("one", "d_out"), np.atleast_2d(sc.b_o)))
    return out


def gains(trace) -> list[tuple[str, tuple[str, str], np.ndarray]]:
    """The latents' RMS gains, where they are normed."""
    m = trace.scenario.mla
    return [(f"mla.{name}", ("one", "rank" if name == "kv_norm" else "q_rank"), np.atleast_2d(m[name]))
            for name in ("kv_norm", "q_norm") if m[name] is not None]


def factor(trace, step) -> tuple[str, np.ndarray] | None:
    """[mla]'s matrix a latent step multiplies by (the rows layout's, transposed in columns), named
    as a panel names it: `W_DKV` beside c_kv, `W_UK (head 1)` beside h1.k_nope, `W_UKᵀ` beside h1.q_latent."""
    if step.kind not in FACTORS:
        return None
    sc, m = trace.scenario, trace.scenario.mla
    key, h = FACTORS[step.kind], step.head if step.head is not None else step.group
    per_head = {"q": lambda: sc.w_q[h][:, :m["nope"]], "rope_q": lambda: sc.w_q[h][:, m["nope"]:],
                "up_k": lambda: sc.w_k[h], "up_v": lambda: sc.w_v[h]}
    shared = {"down": "w_dkv", "q_down": "w_dq", "rope_k": "w_kr"}
    w = m[shared[key]] if key in shared else per_head[key]()
    name = SYMBOLS[f"mla.{key}"]
    if step.kind == "q_latent":   # Q_NOPE·W_UKᵀ in rows; W_UK·Q_NOPE in columns
        w, name = w.T, name + ("" if trace.columns else "ᵀ")
    w = w.T if trace.columns else w
    return (name if h is None or key in shared else f"{name} (head {h})"), w
