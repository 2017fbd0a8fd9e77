"""`tracer.check` and `attnsim check` (CONTRACT §19): a student's own intermediates, keyed by step
ids in the scenario's layout (an npz as `export` writes it, or a dict of arrays or tensors),
compared with the trace in its order. The first differing cell is reported with yours, the
expected value, how attnsim computed it, and the likely cause (tracer/mistakes.py).

Tolerance: a cell matches when |yours − expected| ≤ √ε · the step's largest |expected|, with ε
the machine epsilon of YOUR array's dtype: float32 code differs from the float64 trace by a few ε
per operation (≈1e-6 of the scale through a product and a softmax), far under √ε = 3.5e-4, while
every classic mistake moves cells by far more; float64 gets √ε = 1.5e-8, float16 3.1e-2,
bfloat16 8.8e-2, integers float64's. −∞ expected is matched by −∞ or a stand-in ≤ −1e4 (−1e9,
finfo.min: its power is 0 too)."""
from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, field

import numpy as np

from .anyarray import as_numpy
from .errors import ScenarioError, one_line
from .ids import parse
from . import mistakes

STAND_IN = -1e4   # a masked score written as a large negative number instead of −∞
EPS = {"bfloat16": 2.0**-7}   # NumPy lacks bfloat16: a tensor of it arrives as float32


@dataclass
class Checked:
    """What `check` found: `ok`, `matching` of `given` steps, the `first` difference (a dict as
    --json writes it, or None) and its `cause` (a mistake's key, "unknown", or None)."""
    scenario: str
    given: int
    matching: int
    first: dict | None = None
    cause: str | None = None
    steps: list = field(default_factory=list)   # (id, matches) in trace order
    source: str = ""

    @property
    def ok(self) -> bool:
        return self.first is None

    def json(self) -> dict:
        return {"scenario": self.scenario, "matching": self.matching, "given": self.given,
                "first": None if self.first is None else {k: _plain(v) for k, v in self.first.items()},
                "cause": self.cause}

    def report(self) -> str:
        lines = [f"check of {self.scenario}{' against ' + self.source if self.source else ''}: "
                 f"{self.matching} of {self.given} given step{'s' * (self.given != 1)} match"]
        if self.first is not None:
            f = self.first
            where = "(its shape)" if f["row"] is None else f"row {f['row']}, col {f['col']}"
            lines += [f"first difference: {f['step']} {where}",
                      f"  yours:     {_shown(f['yours'])}", f"  expected:  {_shown(f['expected'])}",
                      f"  how:       {f['explain']}", f"  likely cause: {f['cause']}"]
        lines.append("steps: " + "  ".join(f"{sid} {'✓' if ok else '✗'}" for sid, ok in self.steps))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def check(scenario, answers, arithmetic: str | None = None, **overrides) -> Checked:
    """Compares `answers` (an npz path, or step id → array, tensor or list) with the trace of `scenario`
    (a Scenario, a built-in name or a path) under the arithmetic given."""
    from .trace import run
    source = ""
    if isinstance(answers, (str, os.PathLike)):
        source, answers = one_line(str(answers), 120), read_npz(answers)
    elif hasattr(answers, "keys"):   # a dict, or numpy.load's NpzFile
        answers = {k: answers[k] for k in answers.keys() if k != "__meta__" and not k.startswith("given/")}
    else:
        raise ScenarioError("answers", "expected an .npz path or a dict of step id → array")
    if not answers:
        raise ScenarioError("ANSWERS", "holds no step; expected arrays keyed by step ids such as h0.weights", source or None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = run(scenario, arithmetic, **overrides)
    given = {}
    for sid, value in answers.items():
        if sid not in trace:
            raise ScenarioError(one_line(str(sid), 60), f"is not a step of {trace.scenario.name}; "
                                f"expected ids such as {', '.join(s.id for s in trace.steps[:6])} (attnsim show "
                                f"{trace.scenario.name} lists them all)", source or None)
        given[sid] = answer_array(value, sid, source)
    out = Checked(trace.scenario.name, len(given), 0, source=source)
    for step in trace.steps:   # in trace order
        if step.id in given:
            diff = _difference(trace, step.id, *given[step.id])
            out.steps.append((step.id, diff is None))
            out.matching += diff is None
            if diff is not None and out.first is None:
                out.first, out.cause = _report(trace, step.id, given, *diff)
    return out


def read_npz(path) -> dict:
    """The arrays of an npz file by name (an export's __meta__ and given/ inputs left out), or a
    one-line error. A regular file only (a FIFO would hang the read), and the arrays' sizes, as
    their headers declare them, must fit in memory before any is inflated (a zip bomb)."""
    from pathlib import Path

    from .memory import fits, gib
    from .readfile import regular
    where = one_line(str(path), 200)
    regular(Path(path), "ANSWERS", "an .npz file", where)
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as err:
        raise ScenarioError("ANSWERS", f"cannot be read ({err.strerror or err}); expected an .npz file", where) from None
    if magic not in (b"PK\x03\x04", b"PK\x05\x06"):
        raise ScenarioError("ANSWERS", "is not an npz (a zip of .npy arrays); expected numpy.savez(path, **{'h0.weights': "
                            "…}) or attnsim export -o FILE.npz", where)
    try:
        with np.load(path, allow_pickle=False) as npz:
            names = [name for name in npz.files if name != "__meta__" and not name.startswith("given/")]
            need = sum(_declared_bytes(npz, name) for name in names)
            if not fits(need):
                raise ScenarioError("ANSWERS", f"declares {gib(need)} of arrays, more than this machine can hold; "
                                    "expected a student's intermediates", where)
            return {name: npz[name] for name in names}
    except ScenarioError:
        raise
    except (ValueError, OSError, EOFError, KeyError) as err:   # a damaged zip, an array of objects
        raise ScenarioError("ANSWERS", f"cannot be read as an npz ({one_line(str(err), 80)}); expected numpy.savez's "
                            "arrays of numbers", where) from None
    except Exception as err:  # zipfile.BadZipFile and friends
        raise ScenarioError("ANSWERS", f"is not a whole npz ({type(err).__name__}); expected numpy.savez's file",
                            where) from None


def _declared_bytes(npz, name: str) -> int:
    """The bytes array `name` of an open npz will take, read from its .npy header alone."""
    with npz.zip.open(name + ".npy") as f:
        fmt = np.lib.format
        header = fmt.read_array_header_1_0 if fmt.read_magic(f) == (1, 0) else fmt.read_array_header_2_0
        shape, _, dtype = header(f)
    return int(np.prod(shape, dtype=object)) * dtype.itemsize


def answer_array(value, sid: str, source: str) -> tuple[np.ndarray, float]:
    """(the array, its tolerance √ε) from a NumPy array, a tensor, a list."""
    eps = EPS.get(str(getattr(value, "dtype", "")).removeprefix("torch."))
    a = as_numpy(value, sid)
    if a.dtype.kind not in "iuf":
        raise ScenarioError(one_line(sid, 60), f"holds {a.dtype} values; expected numbers", source or None)
    eps = eps or (float(np.finfo(a.dtype).eps) if a.dtype.kind == "f" else float(np.finfo(np.float64).eps))
    return a, math.sqrt(eps)


def _difference(trace, sid: str, yours: np.ndarray, tol: float):
    """None when your step matches; else (your array in the rows orientation, the first differing
    cell in the layout), or (your array as given, None) when its shape is not the step's."""
    want = trace[sid]
    if yours.shape != want.shape:
        if yours.size != want.size or tuple(d for d in yours.shape if d != 1) != tuple(d for d in want.shape if d != 1):
            return yours, None
        yours = yours.reshape(want.shape)   # (n,) for an n × 1 step: the same cells
    bad = ~agree(yours, want, tol)
    if not bad.any():
        return None
    cell = tuple(int(i) for i in np.argwhere(bad)[0])
    rows = yours.T if trace.columns else yours
    return rows, cell


def agree(yours: np.ndarray, want: np.ndarray, tol: float) -> np.ndarray:
    """Cell by cell: within tol of the step's scale, or −∞ where −∞ is expected (or a stand-in)."""
    finite = np.isfinite(want)
    scale = float(np.abs(want[finite]).max()) if finite.any() else 1.0
    y = np.asarray(yours, np.float64)
    with np.errstate(invalid="ignore"):
        close = np.abs(y - want) <= tol * max(scale, 1e-300)
    return np.where(finite, close, (y == want) | ((want == -np.inf) & (y <= STAND_IN)))


def _report(trace, sid: str, given: dict, yours, cell) -> tuple[dict, str]:
    """The first difference as --json writes it, and its cause's key."""
    want = trace[sid]
    if cell is None:   # a wrong shape
        key, why = _shape_cause(trace, sid, yours)
        return {"step": sid, "row": None, "col": None, "yours": list(yours.shape), "expected": list(want.shape),
                "explain": trace.step(sid).formula, "cause": why}, key
    r, c = cell
    key, why = recognise(trace, sid, yours, given[sid][1])
    missing = [i for i in trace.step(sid).inputs if i not in given and i != "x" and i in trace]
    if key == "unknown" and missing:
        why += f"; give your {', '.join(missing)} too, to see whether the difference starts there"
    mine = yours.T if trace.columns else yours
    return {"step": sid, "row": r, "col": c, "yours": float(mine[r, c]), "expected": float(want[r, c]),
            "explain": trace.explain(sid, r, c), "cause": why}, key


def recognise(trace, sid: str, yours_rows: np.ndarray, tol: float) -> tuple[str, str]:
    """(the mistake's key, what it says and how to fix it) for your step (rows orientation)."""
    kind = parse(sid).kind
    here = mistakes.CHAIN.index(kind) if kind in mistakes.CHAIN else -1
    said = mistakes.words(trace)
    right = trace.rows(sid)
    for m in mistakes.TABLE:
        if here < mistakes.CHAIN.index(m.first):
            continue
        try:
            variant = m.variant(trace)
            got = None if variant is None else variant(sid)
        except ScenarioError:   # a variant this scenario refuses (another mask under [decode], …)
            continue
        if got is None or got.shape != right.shape or agree(got, right, 1e-9).all():
            continue   # the mistake cannot happen here, or does not show at this step
        nan_rows = kind not in ("k", "v", "k_rot") and bool(np.isnan(yours_rows).any())
        if _like(yours_rows, got, tol, _lonely(trace, variant) if nan_rows else None):
            return m.key, f"{m.says.format(**said)}; {m.fix.format(**said)}"
    return _looks(trace, sid, yours_rows, tol)


def _lonely(trace, variant) -> np.ndarray:
    """The queries that see no key in some head of the variant (their weights are 0 there)."""
    rows = np.zeros(trace.scenario.n, bool)
    for h in range(trace.scenario.heads):
        sid = trace.plan_ids(h).get("weights")
        w = None if sid is None else variant(sid)
        if w is not None:
            rows |= (w == 0).all(axis=1)
    return rows


def _like(yours: np.ndarray, got: np.ndarray, tol: float, lonely) -> bool:
    """Your step is the variant's, except in the rows you left NaN for a query with nothing to see
    (softmax of a row of −∞, in PyTorch and NumPy alike)."""
    keep = np.ones(len(yours), bool)
    if lonely is not None and len(lonely) == len(yours):
        keep = ~(lonely & np.isnan(yours).any(axis=1))
    return bool(keep.any() and agree(yours[keep], got[keep], tol).all())


def _looks(trace, sid: str, yours: np.ndarray, tol: float) -> tuple[str, str]:
    """What the numbers look like when no variant matches them whole."""
    kind, right = parse(sid).kind, trace.rows(sid)
    if right.shape[0] == right.shape[1] and agree(yours.T, right, tol).all():
        return "transposed_step", ("your array is this step transposed (keys as rows: the other layout, or K·Qᵀ "
                                   "for Q·Kᵀ)")
    if kind in ("scaled", "masked") and parse(sid).with_kind("scores") in trace:
        scores = trace.rows(parse(sid).with_kind("scores"))
        ok = np.isfinite(yours) & np.isfinite(scores) & (np.abs(scores) > 0)
        ratio = scores[ok] / yours[ok] if ok.any() else np.array([])
        if ratio.size and np.allclose(ratio, ratio[0], rtol=tol) and np.isfinite(ratio[0]):
            return "wrong_scale", (f"your scores are divided by {ratio[0]:.4g}; expected ÷ "
                                   f"{mistakes.words(trace)['c']} (√d_k, d_k = {trace.scenario.d_k})")
    if kind == "weights":
        finite = np.isfinite(yours).all()
        if finite and np.allclose(yours.sum(axis=0), 1, atol=tol) and not np.allclose(yours.sum(axis=1), 1, atol=tol):
            return "softmax_axis", "your weights' columns sum to 1, not their rows: the softmax ran over the queries"
    return "unknown", "not one of the classic mistakes attnsim knows; compare your cell with how it is computed"


def _shape_cause(trace, sid: str, yours: np.ndarray) -> tuple[str, str]:
    want = trace[sid]
    if yours.shape == want.shape[::-1]:
        return "transposed_step", (f"your array is {yours.shape[0]} × {yours.shape[1]}, the step is "
                                   f"{want.shape[0]} × {want.shape[1]} ({' × '.join(trace.step(sid).axes)}): "
                                   "transposed (the other layout?)")
    return "shape", (f"your array has shape {tuple(yours.shape)}; the step is {want.shape[0]} × {want.shape[1]} "
                     f"({' × '.join(trace.step(sid).axes)})")


def _plain(v):
    """JSON's values: −∞ and NaN as the exports write them."""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def _shown(v) -> str:
    if isinstance(v, list):
        return " × ".join(map(str, v))
    return "−∞" if v == -math.inf else f"{v:.6g}".replace("-", "−")
