"""Each matrix's Scale measured once while the matrix lives, and the neighbours' measured ahead.

Measuring a Scale reads every cell (the colour range, one printing per number): about 0.1 s for a
GPT-2-size step, most of a keypress. Stepping back, switching heads and redrawing the same panel
reuse it; after a step is drawn, the steps next to it are measured on a background thread, so `n`
and `p` find theirs ready. NumPy does the work there, mostly outside the GIL."""
from __future__ import annotations

import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .heat import Scale

_scales: dict[tuple, tuple[weakref.ref, Scale]] = {}
_lock = threading.Lock()
_ahead = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attnsim-scales")
_wanted = [0]   # the newest look-ahead: an older one still queued is skipped


def _root(array: np.ndarray):
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _key(array: np.ndarray, fractions: bool, tol: float) -> tuple:
    """The cells a view shows: where its data starts, its shape and strides (a layout's transpose
    is a new view of the same array each time it is asked for)."""
    return (array.__array_interface__["data"][0], array.shape, array.strides, array.dtype.str, fractions, tol)


def scale_of(array: np.ndarray, fractions: bool, tol: float) -> Scale:
    array = np.asarray(array)
    key = _key(array, fractions, tol)
    root = _root(array)
    with _lock:
        hit = _scales.get(key)
    if hit is not None and hit[0]() is root:
        return hit[1]
    scale = Scale(array, fractions, tol)
    try:   # forgotten with the matrix: a closed scenario's memory is not kept alive here
        ref = weakref.ref(root, lambda _, key=key: _forget(key))
    except TypeError:
        return scale
    with _lock:
        _scales[key] = (ref, scale)
    return scale


def _forget(key: tuple) -> None:
    with _lock:
        _scales.pop(key, None)


def measure_ahead(arrays, fractions: bool, tol: float) -> None:
    """Measures these arrays' Scales on the background thread (the newest call wins)."""
    with _lock:
        _wanted[0] += 1
        ticket = _wanted[0]

    def run() -> None:
        for array in arrays:
            if _wanted[0] != ticket:
                return
            scale_of(array, fractions, tol)
    _ahead.submit(run)
