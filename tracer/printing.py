"""How a number is written for a person: exact fractions where exact inputs and the by-hand
arithmetic make them (27/46, 3/4), four significant digits otherwise, and −∞ for a masked score.
Within one table a number has one printing (table_writer)."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

MAX_DENOMINATOR = 1000        # a value as typed (2/3, 0.125) is a small fraction; more means data
RESULT_DENOMINATOR = 10 ** 6  # a computed value is written as a fraction up to this (by-hand's 6561/7381)
DIGITS = 4          # significant digits of every decimal the TUI, show, md and pictures write
CHUNK = 1 << 13     # cells a table's printing is measured in at a time (small: no large temporaries)
MAX_DISTINCT = 512  # typed inputs hold few distinct values; more means data, not a worksheet


def tolerance(dtype) -> float:
    """How close (relative) a value must be to a fraction to be that fraction: a few ulps of the
    dtype, so that arithmetic rounding is forgiven but an arbitrary decimal is not snapped."""
    return 1e-15 if np.dtype(dtype).itemsize >= 8 else 2.5e-7


def rational(arithmetic, d_k: int) -> bool:
    """Whether this arithmetic keeps rational inputs rational (÷2, 3ˣ: yes; ÷√3, eˣ: no). Under
    irrational arithmetic a value near a small fraction is a coincidence, not a fraction."""
    if arithmetic.normalize == "softmax" and arithmetic.softmax_base == "e":
        return False
    return arithmetic.scale != "sqrt" or math.isqrt(d_k) ** 2 == d_k


def exact_values(*arrays) -> bool:
    """Whether every value is a small fraction as typed (2, −1, 0.5, 1/3): inputs whose results can
    be exact. Random or learned weights are not, so their results are written as decimals."""
    for a in arrays:
        if a is None or not a.size:
            continue
        a = np.asarray(a, dtype=np.float64)
        if not np.isfinite(a).all():
            return False
        odd = np.unique(a[a != np.round(a)])
        if odd.size > MAX_DISTINCT or any(as_fraction(float(v)) is None for v in odd):
            return False
    return True


def fractions_for(trace) -> bool:
    """The one rule for writing fractions at all: exact inputs through rational arithmetic.
    Every writer (explain, show, exports, pictures, the TUI) asks this."""
    return rational(trace.arithmetic, trace.scenario.d_k) and trace.scenario.exact


def as_fraction(value: float, tol: float = 1e-15, limit: int = MAX_DENOMINATOR) -> Fraction | None:
    """The fraction of denominator at most `limit` equal to value (within tol, relative), if there
    is one. Coarse tolerances (float32) only accept denominators up to 100: fractions up to 1000 lie
    about 1e-6 apart, so nearly any float32 value would match one. A nonzero value is never 0.
    (Within float64's 1e-15 a true fraction of denominator q is mistaken for one up to `limit`
    only when q·limit passes 1e15: never for a by-hand sheet's q.)"""
    if not math.isfinite(value):
        return None
    f = Fraction(value).limit_denominator(limit if tol <= 1e-12 else 100)
    if f == 0 and value != 0:   # 4.2e−18 is not 0/1: an underflow or a rounding is shown as it is
        return None
    return f if abs(float(f) - value) <= tol * abs(value) else None   # relative: 1.9e-6 is not 1/531442


def decimal(value: float, digits: int = DIGITS) -> str:
    """`digits` significant digits; a rounded value keeps its trailing zeros (0.4500 is 0.45003,
    0.45 is exactly 0.45), so that neighbours in a column carry the same precision."""
    short = f"{value:.{digits}g}"
    return short if float(short) == value else padded(value, digits)


def padded(value: float, digits: int = DIGITS) -> str:
    """`digits` significant digits, trailing zeros kept: 2.000, 9.420e−07."""
    text = f"{value:#.{digits}g}"
    return text.replace(".e", "e").removesuffix(".")


def fmt(value: float, fractions: bool = True, digits: int = DIGITS, tol: float = 1e-15) -> str:
    """A short text for value: `3`, `−1`, `1/3`, `1/2` (`0.5` without fractions), `0.2119`, `−∞`."""
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if value == int(value) and abs(value) < 1e15:
        text = str(int(value))
    else:
        f = as_fraction(value, tol, RESULT_DENOMINATOR) if fractions else None
        text = decimal(value, digits) if f is None else _fraction(f)
    return text.replace("-", "−")


def _fraction(f: Fraction) -> str:
    """3 or 27/46; 3/4 too, not 0.75: one rule, so that a table never mixes 0.75 with 27/46."""
    return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"


def table_writer(array, fractions: bool = True, tol: float = 1e-15, digits: int = DIGITS):
    """fmt for the cells of one table, with one printing per printed number: where an exact 2
    and a rounded 1.9999997 would read `2` and `2.000`, both read `2.000`."""
    array = np.asarray(array)
    short = set()                                    # printed numbers some cell prints short: 2, 0.5
    for a, key in map(_keyed, _chunks(array)):     # chunk by chunk: a table is never held twice
        short.update(key[np.abs(a - key) <= 1e-12 * np.abs(key)].tolist())   # np.isclose, finite values
    short = np.array(sorted(short))
    near = np.empty(0)                               # none prints short: nothing to align (a second pass spared)
    if len(short):
        near = np.unique(np.concatenate([np.unique(a[np.isin(key, short)])
                                         for a, key in map(_keyed, _chunks(array))] or [[]]))
    groups: dict[float, set] = {}
    for k, v in zip(_rounded(near, digits).tolist(), near.tolist()):
        groups.setdefault(k, set()).add(v)
    same = {}
    for values in groups.values():   # a fraction (1/3) is its own exact number, never padded
        texts = {v: fmt(v, fractions, digits, tol) for v in values}
        decimals = [v for v, text in texts.items() if "/" not in text]
        if len({texts[v] for v in decimals}) > 1:
            same.update((v, padded(v, digits).replace("-", "−")) for v in decimals)

    def write(value) -> str:
        value = float(value)
        return same.get(value) or fmt(value, fractions, digits, tol)
    return write


def _chunks(array: np.ndarray):
    """The array's cells a few rows at a time (a view each: no full-size temporaries)."""
    if not array.size:
        return
    a = array.reshape(-1, array.shape[-1]) if array.ndim > 1 else array.reshape(1, -1)
    step = max(1, CHUNK // max(1, a.shape[1]))
    for r in range(0, a.shape[0], step):
        yield a[r:r + step]


def _keyed(chunk: np.ndarray, digits: int = DIGITS) -> tuple[np.ndarray, np.ndarray]:
    """A chunk's finite nonzero values and the number each prints, however it is written."""
    a = chunk.astype(np.float64).ravel()
    a = a[np.isfinite(a) & (a != 0)]
    return a, _rounded(a, digits)


# 10^k for k = -LOWEST … 308, each correctly rounded: looked up, a table's steps cost a quarter of
# what 10.0 ** k costs over a million cells (and NumPy's vector power is an ulp off for some k)
LOWEST = 340
POWERS = np.array([1 / 10 ** -k if k < 0 else float(10 ** k) for k in range(-LOWEST, 309)])


def _rounded(a: np.ndarray, digits: int) -> np.ndarray:
    """Each value rounded to `digits` significant digits (nonzero, finite values)."""
    with np.errstate(all="ignore"):   # a subnormal's step underflows to 0: its key is nan, alone
        k = np.floor(np.log10(np.abs(a))).astype(np.int64) - (digits - 1)
        step = POWERS.take(np.clip(k, -LOWEST, 308) + LOWEST)
        return np.round(a / step) * step


# what a table of fractions says when a cell is a decimal: its denominator would pass the limit,
# or it is no fraction at all (cos, tanh, √ under by-hand)
DECIMALS_NOTE = f"decimals: no fraction with a denominator up to {RESULT_DENOMINATOR:,} equals them".replace(",", " ")


def is_decimal(text: str) -> bool:
    """Whether a written number is a decimal (0.8889, 1.2e−05), not a whole number, fraction or ∞."""
    return "/" not in text and any(c in text for c in ".e")


def divisor(text: str) -> str:
    """A number written after ÷: `9 ÷ (46/3)`, since `9 ÷ 46/3` reads as (9 ÷ 46)/3."""
    return f"({text})" if "/" in text else text


def fmt_approx(value: float, fractions: bool = True, tol: float = 1e-15) -> str:
    """Like fmt, with the decimal beside a fraction, to the same four digits as every decimal:
    `27/46 ≈ 0.5870`."""
    text = fmt(value, fractions, tol=tol)
    if "/" in text:   # the fraction's own decimal: 3/40 ≈ 0.075, not its rounded value's 0.07500
        text += f" ≈ {decimal(float(Fraction(text.replace('−', '-'))))}".replace("-", "−")
    return text
