"""Holds BLAS to one thread while a parallel kernel runs (each of its threads calls BLAS).

numba's np.dot calls SciPy's OpenBLAS; left multi-threaded inside a parallel loop it would start
threads within threads (slower, and OpenBLAS warns it may hang). Every OpenBLAS loaded (SciPy's,
NumPy's) is held, since nothing else runs meanwhile. Found once, by name, on Linux.
"""
from __future__ import annotations

import ctypes
import threading
from contextlib import contextmanager

_lock = threading.Lock()   # one parallel kernel at a time: it uses every core anyway
_api = None                # [(set_num_threads, get_num_threads), ...]; [] when none found


def _find() -> list:
    """The thread controls of every OpenBLAS loaded (numba's is SciPy's), or [] (another BLAS,
    or not Linux)."""
    from . import cache as _numba_cache
    _numba_cache.preload_blas()
    import scipy.linalg.cython_blas  # noqa: F401  (loads the library numba's np.dot uses)
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    except OSError:
        return []
    found = []
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        # SciPy's, NumPy's 64-bit build (its names end in 64_), a plain OpenBLAS
        for prefix, suffix in (("scipy_openblas", ""), ("scipy_openblas", "64_"), ("openblas", "")):
            try:
                found.append((getattr(lib, f"{prefix}_set_num_threads{suffix}"),
                              getattr(lib, f"{prefix}_get_num_threads{suffix}")))
                break
            except AttributeError:
                continue
    return found


def can_limit() -> bool:
    """True when BLAS can be held to one thread, i.e. BLAS inside a parallel loop is safe."""
    global _api
    if _api is None:
        _api = _find()
    return bool(_api)


@contextmanager
def one_thread():
    """BLAS on one thread (if it can be limited) and no other parallel kernel, for the duration."""
    with _lock:
        if not can_limit():
            yield
            return
        old = [get() for _, get in _api]
        for put, _ in _api:
            put(1)
        try:
            yield
        finally:
            for (put, _), threads in zip(_api, old):
                put(threads)
