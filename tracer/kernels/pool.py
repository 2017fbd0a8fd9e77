"""Recycles the large buffers of traces that are gone, so that the next trace does not pay for
fresh memory again (page faults: ≈0.3 s per GiB here, ≈3 s for memory the machine never used).

`empty(shape, dtype)` returns an ordinary NumPy array. When the last array made from its block
dies (the trace, and every view a caller kept), the block waits here for a trace of about the same
size. At most a quarter of what the process could hold waits (a whole 4096-token trace's steps fit
on a 16 GiB machine), the oldest freed first, and a block that waits IDLE_SECONDS with no trace
taking it goes back to the OS: an idle notebook does not sit on gigabytes. Nothing a live trace
holds is pooled, and a run that fits in memory only without the waiting blocks frees them first
(memory.fits).
"""
from __future__ import annotations

import collections
import functools
import os
import threading
import time

import numpy as np

MIN_BYTES = 1 << 20     # smaller arrays: ordinary allocation (malloc recycles those itself)
IDLE_SECONDS = 30.0     # a block no trace took in this long is freed
ALIGN = 4096            # arrays start on a page: whole cache lines for every row of a wide step
_free: list[tuple[float, np.ndarray]] = []   # (when freed, raw uint8 block), oldest first
# Blocks come back here and nothing more: the garbage collector may free a trace in any thread at
# any moment, even one inside this module's lock or threading's own (a lock taken, or a thread
# started, there could wait on itself).
_returned: collections.deque = collections.deque()
_lock = threading.Lock()
_reaper: list[threading.Thread] = []   # the thread that frees blocks left waiting, once started


class _Lease:
    """Owns one block while any array made from it lives (it is their `.base`)."""

    def __init__(self, block: np.ndarray, shape: tuple, dtype: np.dtype):
        self.block = block
        start = block.ctypes.data + (-block.ctypes.data) % ALIGN
        self.__array_interface__ = {"shape": tuple(shape), "typestr": dtype.str, "version": 3,
                                    "data": (start, False)}

    def __del__(self):
        try:
            _returned.append((time.monotonic(), self.block))
        except Exception:  # interpreter shutdown: let it go
            pass


@functools.cache
def keep_bytes() -> int:
    """The most bytes that wait: a quarter of what this process could hold, at least 1 GiB."""
    from ..memory import capacity
    return max(1 << 30, capacity() // 4)


def _drain() -> None:
    """The blocks given back since, into the waiting list, oldest dropped past keep_bytes (under _lock)."""
    keep = keep_bytes()
    while _returned:
        when, block = _returned.popleft()
        if block.nbytes <= keep:
            _free.append((when, block))
    while sum(b.nbytes for _, b in _free) > keep:
        _free.pop(0)


def _take(nbytes: int) -> np.ndarray | None:
    """The smallest free block that fits without wasting more than a quarter of it."""
    with _lock:
        _drain()
        fits = [i for i, (_, b) in enumerate(_free) if nbytes <= b.nbytes <= nbytes + nbytes // 4]
        if not fits:
            return None
        return _free.pop(min(fits, key=lambda i: _free[i][1].nbytes))[1]


def _reap() -> None:
    """Frees the blocks that waited IDLE_SECONDS, looking about every second (a daemon thread)."""
    while True:
        time.sleep(min(1.0, IDLE_SECONDS))
        with _lock:
            _drain()
            now = time.monotonic()
            _free[:] = [(t, b) for t, b in _free if now - t < IDLE_SECONDS]


def _reaping() -> bool:
    return bool(_reaper) and _reaper[0].is_alive()


def _start_reaper() -> None:
    with _lock:
        if not _reaping():   # never started, or stopped by an error of its own: (again)
            _reaper[:] = [threading.Thread(target=_reap, name="attnsim-pool", daemon=True)]
            _reaper[0].start()


def _after_fork() -> None:
    """A forked child has no reaper thread (nor a lock another thread held)."""
    global _lock
    _lock = threading.Lock()
    _reaper.clear()


os.register_at_fork(after_in_child=_after_fork)


def empty(shape, dtype) -> np.ndarray:
    """np.empty(shape, dtype), from a recycled block when one fits."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes < MIN_BYTES:
        return np.empty(shape, dtype)
    block = _take(nbytes + ALIGN)
    if block is None:
        block = np.empty(nbytes + ALIGN, np.uint8)
    if not _reaping():
        _start_reaper()
    return np.asarray(_Lease(block, shape, dtype))


def held() -> int:
    """Bytes of freed blocks waiting for reuse."""
    with _lock:
        _drain()
        return sum(b.nbytes for _, b in _free)


def release() -> None:
    """Frees every waiting block (e.g. before a memory-hungry step of one's own)."""
    with _lock:
        _drain()
        _free.clear()
