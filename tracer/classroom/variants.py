"""A different sheet for every student: fresh small whole numbers in the scenario's shapes (same
heads, mask, layout and arithmetic), drawn from a seed and kept only when the by-hand sheet stays
something to do with a pencil: every cell a whole number or a fraction over at most 243."""
from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np

from .. import mechanisms
from ..arithmetic import resolve
from ..errors import ScenarioError
from ..figures.worksheet import MAX_FEATURES, MAX_TOKENS
from ..ids import parse
from ..printing import rational
from .identity import GIVEN

PRESET = "by-hand"
BOUND = 243          # the largest denominator on a sheet (3⁵; the classroom exercise's largest is 46)
LARGEST = 1000       # the largest magnitude on a sheet: three digits to carry by hand
TRIES = 20000        # changes tried for one student before the scenario is called unfillable (QK-norm's
#                      sheets take about 2 000 on average, ALiBi's 1 000, the classroom exercise's 20)
STALL = 150          # changes without progress before starting again from a fresh draw
NEAR = 1e-12         # relative distance of a float64 cell from its fraction (rounding, never more)
DENOMINATORS = np.arange(1, BOUND + 1, dtype=np.float64)


SECTIONS = {"model": "it is a layer of a real checkpoint, whose inputs are the model's own",
            "random": "its inputs come from a [random] section, sized for a computer, not a pencil"}


def refuse_document(doc: dict, name: str) -> None:
    """Refuses, before anything is built, a scenario file whose inputs are not typed numbers."""
    for section, why in SECTIONS.items():
        if isinstance(doc, dict) and section in doc:
            raise _unfillable(name, why)


def refuse_unfillable(scenario) -> None:
    """A ScenarioError naming the scenario when its shapes or arithmetic cannot give small exact
    numbers whatever the inputs (a checkpoint's layer, square roots, a sheet too big to fill)."""
    sc = scenario
    why = None
    own = next((words for words in (m.unfillable(sc) for m in mechanisms.present(sc)) if words), None)
    if sc.model is not None or sc.random is not None:
        why = SECTIONS["model" if sc.model is not None else "random"]
    elif own:   # a mechanism's own reason (rotary positions' cosines, soft-capping's tanh)
        why = own
    elif sc.norm_in is not None or (sc.residual or {}).get("norm") == "layer":
        eps = (sc.norm_in or sc.residual).get("eps", 0)
        why = (f"a norm divides by a square root (of the variance + eps, eps = {eps:g}), which is not a fraction"
               if eps else "a norm divides by a square root, which is not a fraction")
    elif max(sc.n, sc.m) > MAX_TOKENS or max(sc.d_model, sc.d_k, sc.d_v) > MAX_FEATURES:
        why = (f"{max(sc.n, sc.m)} tokens and {max(sc.d_model, sc.d_k, sc.d_v)} features are more than a sheet "
               f"filled by hand holds (at most {MAX_TOKENS} tokens and {MAX_FEATURES} features)")
    elif not rational(resolve(PRESET, sc.defaults), sc.d_k):
        why = "its arithmetic ([defaults]) takes square roots or powers of e even under the by-hand preset"
    if why:
        raise _unfillable(sc.name, why)


def _unfillable(name: str, why: str) -> ScenarioError:
    return ScenarioError("SCENARIO", f"{name} cannot be filled with small numbers: {why}; expected a small "
                         "scenario with by-hand arithmetic, such as by_hand, gpt_causal or multi_head")


@dataclasses.dataclass(frozen=True)
class Pool:
    """What one input matrix's entries are drawn from: its own nonzero whole values (at most 10
    in size, 1 when it has none) and, with the chance `zero`, 0: the original's look, new numbers."""
    values: tuple[int, ...]
    zero: float

    @classmethod
    def like(cls, a: np.ndarray) -> "Pool":
        whole = np.unique(np.clip(np.round(a[np.isfinite(a)]), -10, 10)).astype(int)
        values = tuple(int(v) for v in whole if v != 0) or (1,)
        return cls(values, float(np.clip(np.mean(a == 0), 0.25, 0.7)) if a.size else 0.5)

    def draw(self, rng: np.random.Generator, shape) -> np.ndarray:
        picked = rng.choice(np.array(self.values, dtype=np.float64), size=shape)
        return np.where(rng.random(shape) < self.zero, 0.0, picked)


def pools(scenario) -> dict[str, Pool]:
    """A pool for every input the scenario gives (the values of v = "k" are the keys')."""
    return {name: Pool.like(getattr(scenario, name)) for name in GIVEN
            if getattr(scenario, name) is not None and not (scenario.v_is_k and name in ("w_v", "b_v"))}


def draw(scenario, rng: np.random.Generator, pool: dict[str, Pool]) -> dict[str, np.ndarray]:
    """Every input drawn afresh, in the same shapes."""
    return {name: p.draw(rng, getattr(scenario, name).shape) for name, p in pool.items()}


def nudge(inputs: dict[str, np.ndarray], rng: np.random.Generator, pool: dict[str, Pool]) -> dict:
    """The inputs with one entry (any matrix, by its size) drawn again, to another value."""
    names = sorted(inputs)
    sizes = np.array([inputs[n].size for n in names], dtype=np.float64)
    name = names[rng.choice(len(names), p=sizes / sizes.sum())]
    a = inputs[name].copy()
    at = tuple(int(rng.integers(n)) for n in a.shape)
    p = pool[name]
    choices = [v for v in (0.0, *map(float, p.values)) if v != a[at]]
    a[at] = choices[rng.integers(len(choices))]
    return {**inputs, name: a}


def with_inputs(scenario, inputs: dict[str, np.ndarray]):
    """The scenario with these inputs (the values of v = "k" are the keys')."""
    new = dict(inputs)
    if scenario.v_is_k:
        new["w_v"] = new["w_k"]
        if "b_k" in new:
            new["b_v"] = new["b_k"]
    return dataclasses.replace(scenario, **new, source=None, files=())


def _denominators(flat: np.ndarray) -> np.ndarray:
    """Each value's denominator (1 to BOUND) as a fraction in lowest terms; 0 for a value that is
    no such fraction, or is larger than LARGEST; −1 for −inf (a masked score)."""
    out = np.where(np.isneginf(flat), -1, 0)
    ok = np.isfinite(flat)
    ok[ok] = np.abs(flat[ok]) <= LARGEST
    whole = ok & (flat == np.round(flat))
    out[whole] = 1
    rest = np.flatnonzero(ok & ~whole)     # most cells are whole: only the others are tried
    scaled = np.outer(flat[rest], DENOMINATORS)
    hits = np.abs(scaled - np.round(scaled)) <= NEAR * np.maximum(1.0, np.abs(scaled))
    out[rest] = np.where(hits.any(axis=1), hits.argmax(axis=1) + 1, 0)
    return out


def as_fractions(a: np.ndarray) -> list:
    """A pencil-sized step's cells as Fractions (−inf stays a float); None for any other cell."""
    flat = a.astype(np.float64).ravel()
    return [None if d == 0 else -np.inf if d < 0 else Fraction(round(v * d), int(d))
            for v, d in zip(flat.tolist(), _denominators(flat).tolist())]


def badness(trace) -> int:
    """How far the sheet is from pencil-sized (0: there): cells that are no whole number or
    fraction over at most BOUND (or are larger than LARGEST), and queries whose weights are all
    equal (a uniform row teaches nothing); an indexer's choices that rest on how a tie is broken."""
    flat = np.concatenate([trace[s.id].astype(np.float64).ravel() for s in trace.steps])
    bad = int(np.count_nonzero(_denominators(flat) == 0))
    if trace.scenario.sparse is not None:   # a lightning indexer: no tie at the bar, and a key dropped
        from ..mechanisms.indexer.compute import unsettled
        bad += unsettled(trace)
    return bad + sum(_uniform(trace, s) for s in trace.steps if s.kind == "weights")


def _uniform(trace, step) -> int:
    """Queries whose weights over the keys they may see are all equal (one key: nothing to vary)."""
    a = trace[step.id]
    masked = parse(step.id).with_kind("masked")
    allowed = np.isfinite(trace[masked]) if masked in trace else np.ones(a.shape, bool)
    if step.axes[0] != "query":   # columns layout: one column per query
        a, allowed = a.T, allowed.T
    return sum(1 for row, ok in zip(a, allowed) if ok.sum() > 1 and np.ptp(row[ok]) <= 1e-12)


def undefined(scenario) -> bool:
    """Whether QK-norm with norm_eps = 0 would divide a row of zeros by its root mean square, 0:
    a cell with no answer (qk_norm keeps every root whole that way), so such inputs are passed over."""
    sc = scenario
    if sc.qk_norm_eps != 0:
        return False
    keys = sc.x if sc.context is None else sc.context
    for gain, source, w, b in ((sc.q_norm, sc.x, sc.w_q, sc.b_q), (sc.k_norm, keys, sc.w_k, sc.b_k)):
        if gain is not None:
            rows = np.einsum("nd,hdk->hnk", source, w) + (0.0 if b is None else b[:, None, :])
            if np.any(np.abs(rows).max(axis=2) == 0):
                return True
    return False


def weights_key(trace) -> bytes:
    """What two students must not share: every head's attention weights (the online algorithm
    forms none: its blocks' powers then; a linear layer its implicit weights; a key of nothing would
    let no second student be)."""
    kinds = {s.kind for s in trace.steps}
    kind = next(k for k in ("weights", "implicit", "powers") if k in kinds)
    return b"".join(np.ascontiguousarray(trace[s.id]).tobytes() for s in trace.steps if s.kind == kind)


def variants(scenario, students: int, seed: int, run):
    """Yields (scenario, trace, cells) for each student in turn. Each starts from inputs drawn
    afresh and changes one entry at a time, keeping a change that leaves the sheet no further from
    pencil-sized (see `badness`), until it is there and unlike the original and every earlier
    student (inputs and attention weights); afresh after STALL changes without progress, TRIES
    changes at most."""
    refuse_unfillable(scenario)
    rng = np.random.default_rng(seed)
    pool = pools(scenario)
    seen_inputs, seen_weights = {_key(scenario, pool)}, set()
    for number in range(1, students + 1):
        inputs, bad, best, since = None, None, None, 0
        for _ in range(TRIES):
            if inputs is None or since >= STALL:
                inputs, bad, best, since = draw(scenario, rng, pool), None, None, 0
            tried = inputs if bad is None else nudge(inputs, rng, pool)
            since += 1
            candidate = with_inputs(scenario, tried)
            try:
                if undefined(candidate):
                    raise ScenarioError("weights.norm_eps", "a row of zeros")
                trace = run(candidate)
            except ScenarioError:   # an overflow or the like: as far from a pencil as it gets
                inputs = inputs if bad is not None else None   # a first draw that fails: draw afresh
                continue
            worse = badness(trace)
            if bad is not None and worse > bad:
                continue
            inputs, bad = tried, worse
            if best is None or bad < best:
                best, since = bad, 0
            key, weights = _key(candidate, pool), weights_key(trace)
            if bad == 0 and key not in seen_inputs and weights not in seen_weights:
                seen_inputs.add(key)
                seen_weights.add(weights)
                yield candidate, trace, {s.id: as_fractions(trace[s.id]) for s in trace.steps}
                break
        else:
            raise ScenarioError("SCENARIO", f"{scenario.name} cannot be filled with small numbers: {TRIES} tries "
                                f"found no sheet for student {number} whose every cell is a whole number or a "
                                f"fraction over at most {BOUND}, with no query's weights all equal; expected fewer "
                                "students, another --seed, or a scenario with fewer tokens or features")


def _key(scenario, pool) -> bytes:
    """The inputs a student is given, as bytes to compare."""
    return b"".join(name.encode() + np.ascontiguousarray(getattr(scenario, name), dtype=np.float64).tobytes()
                    for name in sorted(pool))
