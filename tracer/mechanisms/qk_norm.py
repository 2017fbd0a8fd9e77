"""QK-norm (Qwen3, Gemma 3, OLMo 2): each token's query and key divided by their root mean square
and multiplied by a learned gain, before the rotation, so that no score can grow without bound.

A scenario file writes `[weights] q_norm`, `k_norm` (one gain vector for all heads, or one per head;
per group for k), `norm_eps` and `norm_scope` ("head": over each head's d_k, Qwen3 and Gemma 3;
"all": over every head's features side by side, OLMo 2). `q_norm = k_norm = "l2"` is the weightless
norm of Llama 4 and nanochat (CONTRACT §17): Llama 4's "L2" norm divides by the root mean square, as
every RMS norm here, with no gain (a gain of ones); `qk_norm_after_rope = true` norms after the
rotation (nanochat, Llama 4)."""
from __future__ import annotations

import numpy as np

from ..checks import choice, kind, number, vectors
from ..errors import ScenarioError
from ..rms import mean_square, refuse_zero_rows, rms_rows
from ..steps.base import Kind, register
from .declaration import Mechanism

SCOPES = ("head", "all")
L2 = "l2"   # the weightless norm's word: an RMS norm with a gain of ones


# ------------------------------------------------------------------ the scenario's keys

def read(scenario, data: dict) -> dict:
    """q_norm (heads × d_k) and k_norm (groups × d_k), with the eps and the scope of the root mean square."""
    weights = data["weights"]
    given = [key for key in ("q_norm", "k_norm") if key in weights]
    if not given:
        for key in ("norm_eps", "norm_scope"):
            if key in weights and not (key == "norm_eps" and weights.get("v_norm")):   # v_norm's eps too
                raise ScenarioError(f"weights.{key}", "expected only with q_norm and k_norm (QK-norm's gains)")
        if weights.get("qk_norm_after_rope"):
            raise ScenarioError("weights.qk_norm_after_rope", "expected q_norm and k_norm in [weights] (nothing to "
                                "norm after the rotation)")
        return {}
    if len(given) == 1:
        other = "k_norm" if given[0] == "q_norm" else "q_norm"
        raise ScenarioError(f"weights.{other}", f"missing; expected with weights.{given[0]} (QK-norm normalises "
                            "the queries and the keys)")
    eps = number(weights.get("norm_eps", 1e-6), "weights.norm_eps")
    if not 0 <= eps < 1:
        raise ScenarioError("weights.norm_eps", f"expected a number from 0 to 1 (added to the mean square), got {eps:g}")
    after = _after_rope(scenario, weights)
    if any(isinstance(weights[key], str) for key in given):
        return {**_weightless(scenario, weights), "qk_norm_eps": eps, "qk_norm_after_rope": after}
    d_k = scenario.d_k
    if after and weights.get("norm_scope") == "all":
        raise ScenarioError("weights.norm_scope", 'expected "head" with qk_norm_after_rope (each head\'s rows are '
                            "turned, then normed)")
    return {"qk_norm_after_rope": after, "q_norm": vectors(weights["q_norm"], "weights.q_norm", scenario.heads, d_k, "d_k"),
            "k_norm": vectors(weights["k_norm"], "weights.k_norm", scenario.groups, d_k, "d_k"),
            "qk_norm_eps": eps, "qk_norm_scope": choice(weights, "norm_scope", SCOPES, "head", "weights.norm_scope")}


def _weightless(scenario, weights: dict) -> dict:
    """`q_norm = k_norm = "l2"`: gains of ones over each head's d_k."""
    for key in ("q_norm", "k_norm"):
        if not (isinstance(weights[key], str) and weights[key] == L2):
            expected = 'a gain (d_k numbers) or "l2"' if key == "q_norm" or isinstance(weights[key], str) \
                else '"l2" as q_norm is "l2"'
            raise ScenarioError(f"weights.{key}", f"expected {expected}, got {kind(weights[key])}")
    if choice(weights, "norm_scope", SCOPES, "head", "weights.norm_scope") != "head":
        raise ScenarioError("weights.norm_scope", 'expected "head" with q_norm = "l2" (the weightless norm of each '
                            "head's q and k)")
    return {"q_norm": np.ones((scenario.heads, scenario.d_k)), "k_norm": np.ones((scenario.groups, scenario.d_k)),
            "qk_norm_scope": "head", "qk_norm_kind": L2}


def _after_rope(scenario, weights: dict) -> bool:
    """`qk_norm_after_rope = true`: q and k turned first, normed after (nanochat, Llama 4)."""
    after = weights.get("qk_norm_after_rope", False)
    if not isinstance(after, (bool, np.bool_)):
        raise ScenarioError("weights.qk_norm_after_rope", f"expected true or false, got {kind(after)}")
    if after and scenario.rope is None:
        raise ScenarioError("weights.qk_norm_after_rope", "expected a [rope] section (no rotation to norm after)")
    return bool(after)


# ------------------------------------------------------------------ the formula: the RMS norm of rows

def refuse_zero(run, which: str, index: list[int], a: np.ndarray) -> None:
    """rms.refuse_zero_rows for QK-norm: `a` the queries (which = "q") of heads `index`, or the keys of
    those groups (heads × tokens × d_k, or tokens × d_k for one); under scope "all" tokens × every
    head's features side by side (index: every head, or group)."""
    sc = run.scenario
    labels = sc.tokens if which == "q" else sc.key_tokens
    group = "head" if which == "q" or sc.groups == sc.heads else "key/value group"
    what = {"q": "query", "k": "key"}[which]
    token = lambda t: f"token {t} ({labels[t]!r})"   # noqa: E731
    if sc.qk_norm_scope == "all":
        words = lambda t: f"every {group}'s {what} of {token(t)}"   # noqa: E731
    elif a.ndim == 2:
        words = lambda t: f"{group} {index[0]}'s {what} of {token(t)}"   # noqa: E731
    else:
        words = lambda i, t: f"{group} {index[i]}'s {what} of {token(t)}"   # noqa: E731
    refuse_zero_rows(a, sc.qk_norm_eps, "weights.norm_eps", words, sc.source)


def rows(m: np.ndarray, gain: np.ndarray, eps: float, scope: str) -> np.ndarray:
    """QK-norm in NumPy: each head's rows (scope "head", gain over its d_k), or each token's row of
    every head side by side (scope "all", OLMo 2: gain over heads·d_k). m is heads × n × d. The
    trace's stacks and the earlier blocks of a checkpoint take it from here."""
    if scope == "head":
        return rms_rows(m, gain, eps)
    heads, n, d = m.shape
    flat = m.transpose(1, 0, 2).reshape(n, heads * d)
    return rms_rows(flat, gain.reshape(1, -1), eps).reshape(n, heads, d).transpose(1, 0, 2)


def normed_all(run, which: str, index: list[int], a: np.ndarray) -> np.ndarray:
    """QK-norm of the queries (which = "q") of consecutive heads `index`, or of the keys of those
    groups (a: … × tokens × d_k): each head's row over its own d_k, or (scope "all") each token's
    row of every head together, sliced."""
    sc = run.scenario
    gain = (sc.q_norm if which == "q" else sc.k_norm)[index[0]:index[-1] + 1, None, :]
    if sc.qk_norm_scope == "head":
        refuse_zero(run, which, index, a)
        return rows(a, gain, sc.qk_norm_eps, "head")
    return shared(run, which)[index[0]:index[-1] + 1]


def shared(run, which: str) -> np.ndarray:
    """Scope "all" (OLMo 2): every head's q (every group's k) side by side, normed per token over
    the whole width, as heads (groups) × tokens × d_k; computed once per trace."""
    from ..kernels import matmul
    key = f"{which}_norm"
    if key not in run.memo:
        sc, dt = run.scenario, run.dtype
        src = run.held(run.step(run.plan_ids(0)[which]).inputs[0])
        w, b = (sc.w_q, sc.b_q) if which == "q" else (sc.w_k, sc.b_k)
        a = matmul(src, np.ascontiguousarray(w, dtype=dt))
        if b is not None:
            a += b[:, None, :].astype(dt)
        count, n, d = a.shape
        refuse_zero(run, which, list(range(count)), a.transpose(1, 0, 2).reshape(n, count * d))
        gain = sc.q_norm if which == "q" else sc.k_norm
        run.memo[key] = np.ascontiguousarray(rows(a, gain, sc.qk_norm_eps, "all"))
    return run.memo[key]


def normed_one(K, run, which: str, index: int, a: np.ndarray) -> np.ndarray:
    """normed_all() for one head (group), with the stage kernel where the norm is the head's own."""
    sc = run.scenario
    if sc.qk_norm_scope == "all":
        return np.ascontiguousarray(shared(run, which)[index])
    gain = (sc.q_norm if which == "q" else sc.k_norm)[index]
    refuse_zero(run, which, [index], a)
    return K.rms_norm(a, np.ascontiguousarray(gain[None, :], dtype=run.dtype), sc.qk_norm_eps)


# ------------------------------------------------------------------ the steps

_WHY = ("Without it, a query and a key can grow as long as training pushes them, and a few scores "
        "then dwarf the rest (softmax all-or-nothing). Dividing each token's {what} by its root mean "
        "square puts it on a fixed scale; a learned gain per feature then sets how sharp the head may be.")
TIP = "square each number of the row, take the mean and its square root; divide, then multiply by the gain"


def _formula(name: str):
    def formula(ctx) -> str:
        kind, after = ctx.dims.of("qk_norm")
        source = f"{name}_rot" if after else name
        if kind == L2:
            return f"{source} ÷ RMS({source}), per token (RMS over its head's d_k; no gain)"
        over = "its head's d_k" if kind == "head" else "every head's, side by side"
        return f"{source} ÷ RMS({source})·g, per token (RMS over {over})"
    return formula


def _which(cell) -> str:
    return "q" if cell.step.kind == "q_norm" else "k"


def _index(cell) -> int:
    return cell.step.group if cell.step.group is not None else cell.step.head


def _row_ids(cell) -> list[str]:
    """The steps whose rows the root mean square is taken over: this head's (its rotated ones, after
    the rotation), or (scope "all") every head's queries (every group's keys), this one's first."""
    own = cell.step.inputs[0] if len(cell.step.inputs) == 1 else cell.sid(_which(cell))
    return [own] + [sid for sid in cell.step.inputs if sid != own]


def _explain(cell) -> str:
    sc, f, i, j = cell.scenario, cell.f, cell.i, cell.j
    rows = [cell.rows(sid)[i].astype(np.float64) for sid in _row_ids(cell)]
    whole = np.concatenate(rows)
    ms, eps = mean_square(whole), sc.qk_norm_eps
    gain = (sc.q_norm if _which(cell) == "q" else sc.k_norm)[_index(cell), j]
    src = cell.rows(cell.step.inputs[0])[i, j]
    who = cell.key_token(i) if _which(cell) == "k" else cell.token(i)
    over = (f"the mean of {who}'s {len(whole)} squares" if len(rows) == 1
            else f"the mean of {who}'s {len(whole)} squares over all {len(rows)} {'heads' if _which(cell) == 'q' else 'groups'}")
    plus = f" + {eps:g}" if eps else ""
    turned = "; turned first, normed after" if sc.qk_norm_after_rope else ""
    if sc.qk_norm_kind == L2:
        return (f"= {f(src)} ÷ √({f(ms)}{plus}) = {f(cell.value)}   ({over}; no gain{turned}: the norm Llama 4 "
                f"calls L2 divides by the root mean square, so the row comes out of length √d_k = "
                f"{f(np.sqrt(len(whole)))}, not 1)").replace("-", "−")
    return (f"= {f(src)} ÷ √({f(ms)}{plus}) × {f(gain)} = {f(cell.value)}   "
            f"({over}; the gain of feature {j}{turned})").replace("-", "−")


def _sources(cell) -> dict:
    width = cell.scenario.d_k
    return {sid: [(cell.i, m) for m in range(width)] for sid in _row_ids(cell)}


def _inputs(kind: str):
    """This head's (group's) q or k, or under scope "all" every head's q (every group's k)."""
    def inputs(ctx, h) -> list[str]:
        if ctx.dims.of("qk_norm")[1]:      # after the rotation: this head's rotated rows
            return [ctx.sid(f"{kind}_rot", h)]
        if ctx.dims.of("qk_norm")[0] != "all":
            return [ctx.sid(kind, h)]
        step = 1 if kind == "q" else ctx.dims.heads // ctx.dims.kv_heads
        return list(dict.fromkeys(ctx.sid(kind, g) for g in range(0, ctx.dims.heads, step)))
    return inputs


def on(after: bool):
    """Present before the rotation, or (qk_norm_after_rope: mechanisms/norm_after_rope) after it."""
    return lambda ctx: ctx.dims.of("qk_norm") is not None and ctx.dims.of("qk_norm")[1] == after


def kinds(after: bool) -> tuple[Kind, Kind]:
    """The steps q_norm and k_norm, before the rotation or after it (registered there by norm_after_rope)."""
    name = "_after_rope" if after else ""
    key_axes = lambda ctx: ("context", "d_k") if ctx.cross else ("token", "d_k")   # noqa: E731
    return (Kind("q_norm" + name, "Queries, normed", ("token", "d_k"), "head", _WHY.format(what="query"), _formula("q"),
                 _explain, _sources, inputs=_inputs("q"), present=on(after), chain="query", tip=TIP,
                 short="q_norm" if after else None),
            Kind("k_norm" + name, "Keys, normed", key_axes, "kv", _WHY.format(what="key"), _formula("k"), _explain,
                 _sources, inputs=_inputs("k"), present=on(after), chain="key", tip=TIP,
                 short="k_norm" if after else None))


_q_kind, _k_kind = kinds(after=False)
register(_q_kind, after="q")
register(_k_kind, after="k")


# ------------------------------------------------------------------ the declaration

def _checkpoint(blk, cfg, layer: int) -> dict:
    if blk.q_norm is None:
        return {}
    each = cfg.family.qk_norm == "head"
    return dict(q_norm=np.tile(blk.q_norm, (cfg.heads, 1)) if each else blk.q_norm.reshape(cfg.heads, -1),
                k_norm=np.tile(blk.k_norm, (cfg.groups, 1)) if each else blk.k_norm.reshape(cfg.groups, -1),
                qk_norm_eps=cfg.eps, qk_norm_scope=cfg.family.qk_norm)


def _said(arrays: dict) -> str | None:
    if "q_norm" not in arrays:
        return None
    after = "; q and k are turned first and normed after" if arrays.get("qk_norm_after_rope") else ""
    if isinstance(arrays["q_norm"], str):
        return "q_norm and k_norm divide each head's q and k by their root mean square, with no gain" + after
    return "q_norm and k_norm RMS-normalise " + ("each head's q and k" if arrays.get("qk_norm_scope", "head") == "head"
                                                 else "q and k over all heads together") + after


DECLARATION = Mechanism(
    "qk_norm", "QK-norm", field="q_norm", label="weights.q_norm",
    weight_keys=("q_norm", "k_norm", "norm_eps", "norm_scope", "qk_norm_after_rope"), read=read,
    arguments={"q_norm": "weights.q_norm", "k_norm": "weights.k_norm", "qk_norm_eps": "weights.norm_eps",
               "qk_norm_scope": "weights.norm_scope", "qk_norm_after_rope": "weights.qk_norm_after_rope"},
    dims=lambda sc: (L2 if sc.qk_norm_kind == L2 else sc.qk_norm_scope, sc.qk_norm_after_rope),
    arrays=lambda sc: {"weights.q_norm": sc.q_norm, "weights.k_norm": sc.k_norm},
    describe=lambda sc: {"eps": sc.qk_norm_eps, "scope": sc.qk_norm_scope,
                         **({"kind": L2} if sc.qk_norm_kind == L2 else {}),
                         **({"after_rope": True} if sc.qk_norm_after_rope else {})},
    given=lambda trace: [] if trace.scenario.qk_norm_kind == L2 else [
        (f"weights.{name}", ("head", "d_k"), gain)
        for name, gain in (("q_norm", trace.scenario.q_norm), ("k_norm", trace.scenario.k_norm))],
    symbols={"weights.q_norm": "g_Q (QK-norm's gain)", "weights.k_norm": "g_K (QK-norm's gain)"},
    given_words=lambda sc: f"QK-norm's eps {sc.qk_norm_eps:g} under the root",
    decode=False, checkpoint=_checkpoint, said=_said, per_head={"q_norm": "head", "k_norm": "group"})
