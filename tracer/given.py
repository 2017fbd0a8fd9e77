"""What a scenario gives a trace (the input, the context, every weight matrix, bias and norm
parameter), as the exports write it, so that an export alone is enough to recompute the trace."""
from __future__ import annotations

import numpy as np

# (row axis, column axis) of each weight in the rows layout; the columns layout writes transposes
AXES = {"q": ("d_model", "d_k"), "k": ("d_model", "d_k"), "v": ("d_model", "d_v"),
        "v_down": ("d_model", "rank"), "v_up": ("rank", "d_v"), "o": ("d_v", "d_out")}
BIASES = {"bq": ("q", "d_k"), "bk": ("k", "d_k"), "bv": ("v", "d_v"), "bo": ("o", "d_out")}


def given(trace) -> list[tuple[str, tuple[str, str], np.ndarray]]:
    """(name, axes, array) of every input, in the trace's layout: `x`, `context`, `weights.q[h]`
    (one per head, or per group for k and v), `weights.o`, `weights.bq` (one row per head),
    `norm_in.gain`, `norm_in.bias`, QK-norm's gains `weights.q_norm` and `weights.k_norm` (one row per
    head or group), `out_norm.gain`. Names are the scenario file's fields (the scalars, such as the
    cap, the ALiBi slopes and the eps, are in the scenario's description)."""
    sc, out = trace.scenario, []
    for sid in ("x", "context"):
        if sid in trace:
            out.append((sid, trace.step(sid).axes, trace[sid]))
    if sc.mla is not None:
        return out + latent(trace)
    for name, axes in AXES.items():
        w = sc.w_o if name == "o" else getattr(sc, f"w_{name}")
        if w is None or (name == "v" and sc.v_is_k):
            continue
        if sc.context is not None and name in ("k", "v", "v_down"):
            axes = ("d_context", axes[1])   # cross-attention: keys and values read the context
        axes = axes[::-1] if trace.columns else axes
        if name == "o":
            out.append(("weights.o", axes, trace.weight("o")))
            continue
        out += [(f"weights.{name}[{i}]", axes, trace.weight(name, i) if name == "q" else trace.weight(name, group=i))
                for i in range(w.shape[0])]
    for name, (of, axis) in BIASES.items():
        b = getattr(sc, f"b_{of}")
        if b is not None:
            out.append((f"weights.{name}", ("head" if of != "o" else "one", axis), np.atleast_2d(b)))
    for part in ("gain", "bias"):
        value = (sc.norm_in or {}).get(part)
        if value is not None:
            out.append((f"norm_in.{part}", ("one", "d_model"), np.atleast_2d(value)))
    for name, gain in (("q_norm", sc.q_norm), ("k_norm", sc.k_norm)):
        if gain is not None:
            out.append((f"weights.{name}", ("head", "d_k"), gain))
    if sc.out_norm is not None:
        out.append(("out_norm.gain", ("one", "d_out"), np.atleast_2d(sc.out_norm["gain"])))
    return out


def latent(trace) -> list[tuple[str, tuple[str, str], np.ndarray]]:
    """given() for [mla]: its matrices under their file names (mla.down, mla.up_k[h], …), then W_O
    and the norms' gains."""
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
    for part in ("gain", "bias"):
        value = (sc.norm_in or {}).get(part)
        if value is not None:
            out.append((f"norm_in.{part}", ("one", "d_model"), np.atleast_2d(value)))
    for name in ("kv_norm", "q_norm"):
        if m[name] is not None:
            out.append((f"mla.{name}", ("one", "rank" if name == "kv_norm" else "q_rank"), np.atleast_2d(m[name])))
    return out


SYMBOLS = {"q": "W_Q", "k": "W_K", "v": "W_V", "v_down": "W_V↓", "v_up": "W_V↑", "o": "W_O",
           "bq": "b_Q", "bk": "b_K", "bv": "b_V", "bo": "b_O", "q_norm": "g_Q (QK-norm's gain)",
           "k_norm": "g_K (QK-norm's gain)"}
LATENT_SYMBOLS = {"down": "W_DKV", "rope_k": "W_KR", "q_down": "W_DQ", "up_k": "W_UK", "up_v": "W_UV", "q": "W_UQ",
                  "rope_q": "W_QR", "kv_norm": "c_kv's gain", "q_norm": "c_q's gain"}
PER_GROUP = ("k", "v", "v_down", "v_up")   # one per key/value group when grouped-query


def display_name(trace, name: str) -> str:
    """A given matrix as the TUI names it: `W_Q (head 0)`, `W_K (group 1)`, `b_Q`, `X`, `norm_in
    gain`, for the file's `weights.q[0]`, `weights.k[1]`, `weights.bq`, `x`, `norm_in.gain`."""
    if name in ("x", "context"):
        return {"x": "X", "context": "the context"}[name]
    section, _, rest = name.partition(".")
    if section == "mla":
        key, _, index = rest.rstrip("]").partition("[")
        symbol = LATENT_SYMBOLS[key]
        return f"{symbol} (head {index})" if index else symbol
    if section != "weights":
        return f"{section} {rest}"
    key, _, index = rest.rstrip("]").partition("[")
    if not index:
        return SYMBOLS.get(key, key)
    grouped = key in PER_GROUP and trace.scenario.groups < trace.scenario.heads
    return f"{SYMBOLS.get(key, key)} ({'group' if grouped else 'head'} {index})"


STEP_WEIGHTS = {"q": "q", "k": "k", "v_down": "v_down", "out": "o"}   # the weight each projection multiplies by
LATENT_FACTORS = {"c_kv": "down", "c_q": "q_down", "k_pe": "rope_k", "q_nope": "q", "q_pe": "rope_q",
                  "k_nope": "up_k", "v": "up_v", "q_latent": "up_k"}   # [mla]'s weight each step multiplies by


def factor(trace, step) -> tuple[str, np.ndarray] | None:
    """The given matrix a step multiplies its input by, in the trace's layout, named as a panel
    names it: `W_Q (head 0)` beside h0.q, `W_K (group 1, read by heads 2 and 3)`, `W_O` beside
    out; under latent attention [mla]'s own (`W_DKV` beside c_kv, `W_UK (head 1)` beside
    h1.k_nope, `W_UKᵀ` beside h1.q_latent). None where no given matrix multiplies."""
    sc = trace.scenario
    if sc.mla is not None and step.kind in LATENT_FACTORS:
        return _latent_factor(trace, step)
    key = ("v_up" if sc.rank is not None else "v") if step.kind == "v" else STEP_WEIGHTS.get(step.kind)
    if key is None or (key == "o" and sc.w_o is None) or sc.mla is not None:
        return None
    scope = {"group": step.group} if step.head is None and step.group is not None else {"head": step.head}
    return trace.weight_name(key, **scope), trace.weight(key, **scope)   # W_O has no head: head=None


def _latent_factor(trace, step) -> tuple[str, np.ndarray]:
    """[mla]'s matrix a latent step multiplies by (the rows layout's, transposed in columns)."""
    sc, m = trace.scenario, trace.scenario.mla
    key, h = LATENT_FACTORS[step.kind], step.head if step.head is not None else step.group
    per_head = {"q": lambda: sc.w_q[h][:, :m["nope"]], "rope_q": lambda: sc.w_q[h][:, m["nope"]:],
                "up_k": lambda: sc.w_k[h], "up_v": lambda: sc.w_v[h]}
    shared = {"down": "w_dkv", "q_down": "w_dq", "rope_k": "w_kr"}
    w = m[shared[key]] if key in shared else per_head[key]()
    name = LATENT_SYMBOLS[key]
    if step.kind == "q_latent":   # Q_NOPE·W_UKᵀ in rows; W_UK·Q_NOPE in columns
        w, name = w.T, name + ("" if trace.columns else "ᵀ")
    w = w.T if trace.columns else w
    return (name if h is None or key in shared else f"{name} (head {h})"), w


def plus_zero(a: np.ndarray) -> np.ndarray:
    """The array with −0.0 made +0.0 (they are equal; an export writes the one a person expects)."""
    return a + 0.0 if a.dtype.kind == "f" else a
