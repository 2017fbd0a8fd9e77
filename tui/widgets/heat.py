"""How a matrix's numbers look on screen: their text (fractions or fixed decimals, −∞ for masked)
and a heatmap colour scaled per matrix, diverging around 0 when the matrix has both signs."""
from __future__ import annotations

import math
import threading
import weakref
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from rich.color import Color
from rich.style import Style

from tracer.printing import as_fraction, fmt, table_writer

LEVELS = 12          # colour steps: enough to read, few enough to cache every style
EXACT = 1024         # matrices up to this many cells are measured cell by cell
ONE_PRINTING = 1 << 20   # matrices up to this many cells print each number one way (~0.1 s to measure)
SAMPLE = 256         # cells looked at to tell whether a larger matrix holds fractions at all
LOW = (38, 44, 58)   # the colour of "small" (near the panel background)
HIGH = (230, 135, 20)
NEGATIVE = (40, 110, 220)
MASKED = Style(color="grey62", bgcolor="grey23", italic=True)
KEPT = 48            # scales remembered (a step of every head and its sources, both presets)


def text(value: float, fractions: bool, integral: bool, tol: float) -> str:
    """One cell's text: 27/46, 0.5870, −∞, 12, as show, explain, md and pictures write it
    (tracer.printing.fmt: one rule of significant digits everywhere)."""
    return fmt(value, fractions, tol=tol)


class Scale:
    """The text and colour of every cell of one matrix."""

    def __init__(self, array: np.ndarray, fractions: bool, tol: float = 1e-15):
        self.tol = tol
        # reductions with `where=` instead of filtered copies: a 2048² step is 32 MB per copy
        finite = np.isfinite(array)
        self.masked = not finite.all()
        self.lo = float(np.min(array, where=finite, initial=np.inf)) if array.size else 0.0
        self.hi = float(np.max(array, where=finite, initial=-np.inf)) if array.size else 0.0
        if self.lo > self.hi:  # nothing finite
            self.lo = self.hi = 0.0
        self.signed = self.lo < 0 < self.hi
        flat = array.ravel()
        sample = flat[:: max(1, flat.size // SAMPLE)][:SAMPLE] if flat.size > EXACT else flat
        sample = sample[np.isfinite(sample)]
        self.integral = bool(np.all(sample == np.round(sample))) and max(-self.lo, self.hi) < 1e15
        self.fractions = fractions and _mostly_fractions(sample, tol)
        self.decimals = not fractions
        self._styles: dict[int, Style] = {}
        self._texts: dict[float, str] = {}  # the visible window is drawn again and again
        self._write = (table_writer(array, self.fractions, tol) if array.size <= ONE_PRINTING
                       else lambda v: fmt(v, self.fractions, tol=tol))
        self.width = self._measure(array, finite, sample)

    def _measure(self, array, finite, sample) -> int:
        """The widest cell text. Large matrices: the extremes bound it (3 significant digits are
        longest for the smallest and the largest magnitudes), plus the sample for fractions."""
        if array.size <= EXACT:
            return max((len(self.text(v)) for v in array.ravel()), default=1)
        smallest = _smallest_magnitude(array)
        extremes = [m for m in (smallest, max(-self.lo, self.hi)) if math.isfinite(m)]
        sign = -1.0 if self.lo < 0 else 1.0
        values = [sign * m for m in extremes] + [float(v) for v in sample]
        return max(2 if self.masked else 1, *(len(self.text(v)) for v in values))

    def text(self, value: float) -> str:
        value = float(value)
        out = self._texts.get(value)
        if out is None:
            if len(self._texts) > 1 << 16:
                self._texts.clear()
            out = self._texts[value] = self._write(value)
        return out

    def level(self, value: float) -> int:
        """−LEVELS..LEVELS for signed matrices (by |value| ÷ max |value|), 0..LEVELS otherwise."""
        if self.signed:
            top = max(-self.lo, self.hi)
            return round(LEVELS * value / top)
        span = self.hi - self.lo
        return LEVELS if span == 0 else round(LEVELS * (value - self.lo) / span)

    def style(self, value: float) -> Style:
        if not math.isfinite(value):
            return MASKED
        n = self.level(value)
        if n not in self._styles:
            self._styles[n] = _style(n)
        return self._styles[n]


_scales: OrderedDict = OrderedDict()   # (the memory's owner, where, how) → (weakref to the owner, Scale)
_lock = threading.Lock()
_ahead = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attnsim-scale")


def scale_for(array: np.ndarray, fractions: bool, tol: float = 1e-15) -> Scale:
    """The Scale of `array`, measured once: a large step costs ~0.1 s to measure, and stepping
    back, switching heads or moving the cursor shows the same arrays again and again."""
    root = array
    while isinstance(root.base, np.ndarray):   # a view (a transposed step, a head's weights)
        root = root.base
    key = (id(root), array.__array_interface__["data"][0], array.shape, array.strides, array.dtype.str,
           fractions, tol)
    with _lock:
        kept = _scales.get(key)
        if kept is not None and kept[0]() is root:
            _scales.move_to_end(key)
            return kept[1]
    scale = Scale(array, fractions, tol)
    try:
        ref = weakref.ref(root)
    except TypeError:   # not an ndarray of its own (cannot be remembered safely)
        return scale
    with _lock:
        _scales[key] = (ref, scale)
        while len(_scales) > KEPT:
            _scales.popitem(last=False)
    return scale


def measure(arrays, fractions: bool, tol: float = 1e-15) -> None:
    """Measures the scales of arrays about to be shown, now (a worker's thread calls it)."""
    for array in arrays:
        scale_for(array, fractions, tol)


def measure_ahead(arrays, fractions: bool, tol: float = 1e-15) -> None:
    """Measures the scales of arrays the next keys will likely show (the neighbouring steps, the
    other heads), off the screen's thread; what is not done by then is measured when shown."""
    _ahead.submit(measure, [a for a in arrays if a.size > EXACT], fractions, tol)   # small ones cost nothing


def _mostly_fractions(sample: np.ndarray, tol: float) -> bool:
    """Whether a matrix is written in fractions: most of its non-whole values are small fractions
    (denominators as typed, up to 1000; once it is, each cell is written as a fraction up to
    tracer.printing.RESULT_DENOMINATOR, by-hand's 6561/7381). Per matrix, not per cell: random
    float32 data lands near some p/q about once in a hundred, and the search costs ~30 µs a cell,
    so noise is never searched cell by cell."""
    parts = [float(v) for v in sample if v != round(v)]
    hits = sum(as_fraction(v, tol) is not None for v in parts)
    return bool(parts) and hits >= len(parts) / 2


def _smallest_magnitude(array: np.ndarray, block: int = 256) -> float:
    """min |v| over finite nonzero v, a block of rows at a time (no full-size temporaries)."""
    best = math.inf
    for start in range(0, array.shape[0], block):
        m = np.abs(array[start:start + block])
        m[(m == 0) | ~np.isfinite(m)] = np.inf
        best = min(best, float(m.min()))
    return best


def _style(n: int) -> Style:
    target = NEGATIVE if n < 0 else HIGH
    t = abs(n) / LEVELS
    rgb = tuple(round(a + (b - a) * t) for a, b in zip(LOW, target))
    luminance = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]
    ink = "black" if luminance > 140 else "white"
    return Style(color=ink, bgcolor=Color.from_rgb(*rgb))
