"""What a scenario gives a trace (the input, the context, every weight matrix, bias and norm
parameter), as the exports write it, so that an export alone is enough to recompute the trace."""
from __future__ import annotations

import numpy as np

from . import mechanisms

# (row axis, column axis) of each weight in the rows layout; the columns layout writes transposes
AXES = {"q": ("d_model", "d_k"), "k": ("d_model", "d_k"), "v": ("d_model", "d_v"),
        "v_down": ("d_model", "rank"), "v_up": ("rank", "d_v"), "o": ("d_v", "d_out")}
BIASES = {"bq": ("q", "d_k"), "bk": ("k", "d_k"), "bv": ("v", "d_v"), "bo": ("o", "d_out")}
GIVEN_KINDS = ("x", "context", "decay", "beta")   # steps a sheet gives filled in: the inputs, and a linear
#                                                  layer's α and β (its [linear] section's numbers)


def given(trace) -> list[tuple[str, tuple[str, str], np.ndarray]]:
    """(name, axes, array) of every input, in the trace's layout: `x`, `context`, `weights.q[h]`
    (one per head, or per group for k and v), `weights.o`, `weights.bq` (one row per head),
    `norm_in.gain`, `norm_in.bias`, then each mechanism's (QK-norm's gains `weights.q_norm` and
    `weights.k_norm`, `out_norm.gain` …; latent attention's [mla] matrices in place of the
    projections). Names are the scenario file's fields (the scalars, such as the cap, the ALiBi
    slopes and the eps, are in the scenario's description)."""
    sc, out = trace.scenario, []
    for sid in ("x", "context"):
        if sid in trace:
            out.append((sid, trace.step(sid).axes, trace[sid]))
    own = next((m.projections for m in mechanisms.present(sc) if m.projections is not None), None)
    out += projections(trace) if own is None else own(trace)
    for part in ("gain", "bias"):
        value = (sc.norm_in or {}).get(part)
        if value is not None:
            out.append((f"norm_in.{part}", ("one", "d_model"), np.atleast_2d(value)))
    return out + mechanisms.given(trace)


def projections(trace) -> list[tuple[str, tuple[str, str], np.ndarray]]:
    """The layer's W_Q, W_K, W_V (or the low-rank pair), W_O and their biases."""
    sc, out = trace.scenario, []
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
    return out


SYMBOLS = {"q": "W_Q", "k": "W_K", "v": "W_V", "v_down": "W_V↓", "v_up": "W_V↑", "o": "W_O",
           "bq": "b_Q", "bk": "b_K", "bv": "b_V", "bo": "b_O"}
PER_GROUP = ("k", "v", "v_down", "v_up")   # one per key/value group when grouped-query


def _symbol(name: str) -> str | None:
    """What a panel calls a given input (`weights.q` → W_Q, `mla.down` → W_DKV), None when nothing."""
    section, _, key = name.partition(".")
    if section == "weights" and key in SYMBOLS:
        return SYMBOLS[key]
    return next((m.symbols[name] for m in mechanisms.MECHANISMS.values() if name in m.symbols), None)


def display_name(trace, name: str) -> str:
    """A given matrix as the TUI names it: `W_Q (head 0)`, `W_K (group 1)`, `b_Q`, `X`, `norm_in
    gain`, for the file's `weights.q[0]`, `weights.k[1]`, `weights.bq`, `x`, `norm_in.gain`."""
    if name in ("x", "context"):
        return {"x": "X", "context": "the context"}[name]
    bare, _, index = name.rstrip("]").partition("[")
    symbol = _symbol(bare)
    section, _, key = bare.partition(".")
    if symbol is None:
        return f"{section} {key}" if section != "weights" else key
    if not index:
        return symbol
    grouped = section == "weights" and key in PER_GROUP and trace.scenario.groups < trace.scenario.heads
    return f"{symbol} ({'group' if grouped else 'head'} {index})"


STEP_WEIGHTS = {"q": "q", "k": "k", "v_down": "v_down", "out": "o"}   # the weight each projection multiplies by


def factor(trace, step) -> tuple[str, np.ndarray] | None:
    """The given matrix a step multiplies its input by, in the trace's layout, named as a panel
    names it: `W_Q (head 0)` beside h0.q, `W_K (group 1, read by heads 2 and 3)`, `W_O` beside
    out; a mechanism's own where it declares one (latent attention's `W_DKV` beside c_kv). None
    where no given matrix multiplies."""
    sc = trace.scenario
    for m in mechanisms.present(sc):
        got = m.factor(trace, step)
        if got is not None:
            return got
    if any(m.projections is not None for m in mechanisms.present(sc)):
        return None
    key = ("v_up" if sc.rank is not None else "v") if step.kind == "v" else STEP_WEIGHTS.get(step.kind)
    if key is None or (key == "o" and sc.w_o is None):
        return None
    scope = {"group": step.group} if step.head is None and step.group is not None else {"head": step.head}
    return trace.weight_name(key, **scope), trace.weight(key, **scope)   # W_O has no head: head=None


def plus_zero(a: np.ndarray) -> np.ndarray:
    """The array with −0.0 made +0.0 (they are equal; an export writes the one a person expects)."""
    return a + 0.0 if a.dtype.kind == "f" else a
