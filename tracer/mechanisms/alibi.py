"""ALiBi (Press et al., "Train short, test long"; BLOOM, some Falcons): no rotary positions; each
head subtracts m_h·(i − j) from the score of query i and key j, a penalty that grows with the
distance, steep in some heads and gentle in others. The slopes are a geometric sequence.

A scenario file writes `alibi = true` (the paper's slopes) or a list of one slope per head."""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import memory
from ..checks import kind, number
from ..errors import ScenarioError
from ..steps.base import Kind, register
from ..steps.scores import standard
from .declaration import Mechanism, per_head


def alibi_slopes(heads: int) -> np.ndarray:
    """The paper's slopes: 2^(−8(h+1)/H) for H a power of two (8 heads: 1/2, 1/4, …, 1/256);
    otherwise the slopes of the power of two P below H, then every other slope of 2P's sequence
    (2P's odd-numbered ones, which fall between P's) until there are H."""
    if isinstance(heads, bool) or not isinstance(heads, numbers.Integral) or heads < 1:
        raise ScenarioError("heads", f"expected a whole number ≥ 1 (one slope per head), got {kind(heads)}")
    if not memory.fits(24 * int(heads)):   # the slopes of P and of 2P
        raise ScenarioError("heads", f"{heads} slopes {memory.shortfall(24 * int(heads))}")
    heads = int(heads)

    def geometric(count: int) -> np.ndarray:
        return 2.0 ** (-8.0 * np.arange(1, count + 1) / count)
    below = 2 ** int(math.floor(math.log2(heads)))
    return np.concatenate([geometric(below), geometric(2 * below)[0::2][:heads - below]])


def distances(n: int, m: int) -> np.ndarray:
    """i − j for query i and key j (n × m): how far back each key is (negative: ahead)."""
    return np.arange(n, dtype=np.float64)[:, None] - np.arange(m, dtype=np.float64)[None, :]


def penalised(s: np.ndarray, slopes) -> np.ndarray:
    """s − m_h·(i − j) in NumPy (s: … × n × m, slopes: one per head, or one number): the NumPy
    twin's and the earlier blocks' (kernels/stages.linear_bias's)."""
    return s - np.asarray(slopes, dtype=np.float64)[..., None, None] * distances(*s.shape[-2:])


def read(scenario, data: dict) -> dict:
    """`true`: the paper's slopes for the heads; a list: one slope per head; `false`: none."""
    value, heads = data.get("alibi"), scenario.heads
    if value is None or value is False:
        return {"alibi": None}
    if scenario.context is not None:
        raise ScenarioError("alibi", "expected self-attention (ALiBi penalises the distance between a query and a "
                            "key of the same sequence), not a context")
    if value is True:
        return {"alibi": alibi_slopes(heads)}
    if isinstance(value, np.ndarray) and value.ndim == 1:
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not value or isinstance(value[0], (list, tuple, np.ndarray)):
        raise ScenarioError("alibi", f"expected true (the paper's slopes) or a list of {_slopes(heads)} (one per "
                            f"head), got {kind(value)}")
    if len(value) != heads:
        raise ScenarioError("alibi", f"expected {_slopes(heads)} (one per head), got {len(value)}")
    return {"alibi": np.array([number(m, f"alibi[{h}]") for h, m in enumerate(value)], dtype=np.float64)}


def _slopes(heads: int) -> str:
    return f"{heads} slope{'s' if heads != 1 else ''}"


# ------------------------------------------------------------------ the step

def _explain(cell) -> str:
    f, m = cell.f, float(cell.scenario.alibi[cell.step.head])
    s = cell.rows(cell.step.inputs[0])[cell.i, cell.j]
    key = cell.starts[1] + cell.j
    d = cell.at - key
    qn, kn = cell.names()
    head = f"head {cell.step.head}'s slope {f(m)}"
    tokens = f"{abs(d)} token{'s' if abs(d) != 1 else ''}"
    if d >= 0:
        why = f"{kn} is {tokens} back from {qn}; {head}"
    elif cell.trace.allowed is not None and not cell.trace.allowed[cell.at, key]:   # masked next
        why = (f"{kn} comes {tokens} after {qn}: −m·(i − j) is a bonus here, not a penalty, but the mask "
               f"removes this key next, so it never counts; {head}")
    else:
        why = (f"{kn} comes {tokens} after {qn} and no mask hides it: a bonus, as BLOOM computes it "
               f"(the paper's models never see a later key); {head}")
    return (f"= {f(s)} − {f(m)}·({cell.at} − {key}) = {f(s)} − {f(m * d)} = {f(cell.value)}   ({why})"
            ).replace("-", "−").replace("− −", "+ ")


def _formula(ctx) -> str:
    later = "; a later key gains, and is masked next" if ctx.masked else ""
    return f"S − m_h·(i − j)   (query i, key j; the head's slope m_h{later})"


register(Kind(
    "biased", "Scores with distance penalty", ("query", "key"), "head",
    "ALiBi gives attention a sense of distance without position vectors: each score loses m_h for every "
    "token between the query and the key. A steep head (m = 1/2) looks at its neighbours; a gentle one "
    "(m = 1/256) reads far back. Nothing is learned, so it extends to texts longer than training's. "
    "A key after the query (j > i) gains m_h·(j − i) instead: models with ALiBi are causal, and the mask "
    "removes those keys in the next step (BLOOM adds m_h·j to every score, the same weights).",
    formula=_formula, explain=_explain, sources=lambda cell: {cell.step.inputs[0]: [(cell.i, cell.j)]},
    inputs=lambda ctx, h: [ctx.latest(h, "logits", "biased")],
    present=lambda ctx: ctx.dims.of("alibi") is not None and standard(ctx), chain="logits",
    tip="subtract the slope times how many tokens back the key is"), after="capped")


# ------------------------------------------------------------------ the declaration

def _checkpoint(blk, cfg, layer: int) -> dict:
    """The family's slopes (BLOOM's; Falcon adds them before ÷√d_k: smaller by that)."""
    if not cfg.family.position.startswith("alibi"):
        return {}
    unscaled = cfg.family.position == "alibi_unscaled"
    return {"alibi": alibi_slopes(cfg.heads) / (math.sqrt(cfg.head_dim) if unscaled else 1.0)}


DECLARATION = Mechanism(
    "alibi", "ALiBi", field="alibi", label="alibi", keys=("alibi",), read=read, arguments={"alibi": "alibi"},
    arrays=lambda sc: {"alibi": sc.alibi}, describe=lambda sc: [float(m) for m in sc.alibi],
    given_words=lambda sc: f"ALiBi's slope m = {per_head(sc.alibi)}",
    fused=False, online=False, decode=False, checkpoint=_checkpoint, per_head={"alibi": "head"},
    said=lambda arrays: "biased subtracts each head's ALiBi slope times the distance to the key" if "alibi" in arrays
    else None)
