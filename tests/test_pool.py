"""The buffer pool (tracer/kernels/pool.py): a freed trace's blocks wait for the next trace, never
while any view of them lives, never longer than IDLE_SECONDS, never more than a quarter of what the
process could hold, and never in the way of a run that needs the memory."""
from __future__ import annotations

import gc
import threading
import time

import numpy as np
import pytest

from tracer import memory
from tracer.kernels import pool

GIB = 1 << 30


@pytest.fixture(autouse=True)
def empty_pool():
    # an earlier test's trace in a reference cycle came back before this (conftest collects first)
    pool.release()
    yield
    pool.release()
    pool.keep_bytes.cache_clear()


def freed(*shape, dtype=np.float64) -> int:
    """Bytes waiting after an array of `shape` from the pool dies."""
    a = pool.empty(shape, dtype)
    del a
    gc.collect()
    return pool.held()


def test_recycled_buffers_come_back_only_when_every_view_is_gone():
    a = pool.empty((4, 512, 512), np.float64)
    a[:] = 1.0
    view = a[2]
    del a
    gc.collect()
    assert pool.held() == 0                      # a view still uses the block
    del view
    gc.collect()
    assert pool.held() >= 4 * 512 * 512 * 8
    b = pool.empty((4, 512, 512), np.float64)    # takes it back
    assert pool.held() == 0                      # nothing else was waiting
    b[:] = 2.0
    c = pool.empty((4, 512, 512), np.float64)    # a fresh one: b is alive
    c[:] = 3.0
    assert np.all(b == 2.0) and np.all(c == 3.0)


def test_a_block_nobody_takes_goes_back_to_the_os(monkeypatch):
    monkeypatch.setattr(pool, "IDLE_SECONDS", 0.3)
    a = pool.empty((1 << 18,), np.float64)
    del a                                        # (no gc.collect: it may take longer than IDLE_SECONDS)
    assert pool.held() >= 8 << 18
    deadline = time.monotonic() + 10
    while pool.held() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pool.held() == 0


def test_a_reaper_that_stopped_is_started_again(monkeypatch):
    stopped = threading.Thread(target=lambda: None)
    stopped.start()
    stopped.join()
    monkeypatch.setattr(pool, "_reaper", [stopped])
    pool.empty((1 << 18,), np.float64)
    assert pool._reaper[0] is not stopped and pool._reaper[0].is_alive()


def test_a_block_taken_again_before_its_time_is_not_freed_under_the_trace(monkeypatch):
    monkeypatch.setattr(pool, "IDLE_SECONDS", 0.5)
    freed(1 << 18)
    a = pool.empty((1 << 18,), np.float64)       # the waiting block, taken back
    a[:] = 5.0
    time.sleep(0.8)                              # the pool looks for blocks to free meanwhile
    assert np.all(a == 5.0) and pool.held() == 0
    del a                                        # (no gc.collect: it may take longer than IDLE_SECONDS)
    assert pool.held() > 0                       # waits again, for another IDLE_SECONDS


def test_a_trace_freed_while_the_pool_is_busy_does_not_wait_on_the_pool():
    """The collector may free a trace in any thread, even in one inside the pool's lock."""
    def free_inside_the_lock():
        a = pool.empty((1 << 18,), np.float64)
        with pool._lock:
            del a
            gc.collect()
    worker = threading.Thread(target=free_inside_the_lock, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive() and pool.held() >= 8 << 18


@pytest.mark.parametrize("capacity, keep", [(16 * GIB, 4 * GIB), (2 * GIB, GIB)])
def test_at_most_a_quarter_of_what_the_process_could_hold_waits(monkeypatch, capacity, keep):
    monkeypatch.setattr(memory, "capacity", lambda: capacity)
    pool.keep_bytes.cache_clear()
    assert pool.keep_bytes() == keep
    # untouched blocks: NumPy maps them, no page is written
    if keep > GIB:
        assert freed(GIB + GIB // 2, dtype=np.uint8) > GIB   # more than 1 GiB waits where there is room
    else:
        assert freed(GIB + 1, dtype=np.uint8) == 0           # more than the quarter never waits


def test_a_run_that_fits_only_without_the_waiting_blocks_frees_them(monkeypatch):
    small = memory.SMALL
    waiting = freed(1 << 18)
    assert waiting > 0
    monkeypatch.setattr(memory, "budget", lambda: 2 * small if pool.held() else 8 * small)
    assert memory.fits(2 * small) and pool.held() == waiting   # fits beside them: they stay
    assert memory.fits(4 * small) and pool.held() == 0         # fits only without them
    assert not memory.fits(16 * small)                          # fits in no case: refused
