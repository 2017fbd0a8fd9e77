"""Timing (round robin, so that a noisy shared machine slows every contender alike), the machine's
matmul peak, and peak memory (in a fresh process, so that nothing earlier is counted)."""
from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np


GAP = 0.15  # seconds of rest before each timed run: the previous contender's idle threads
#            (BLAS and OpenMP pools spin for a while after each call) have gone to sleep


def round_robin(calls: dict, reps: int, batch: int = 1, warm: bool = True) -> dict[str, float]:
    """Median seconds per call of each callable: one warm-up each (compiles, first touches) unless
    done already, then `reps` rounds in which every contender runs once (`batch` calls, timed
    together), each after a short rest so that no contender pays for another's spinning threads."""
    for call in calls.values() if warm else ():
        call()
    times = {name: [] for name in calls}
    for _ in range(reps):
        for name, call in calls.items():
            gc.collect()
            time.sleep(GAP)
            start = time.perf_counter()
            for _ in range(batch):
                call()
            times[name].append((time.perf_counter() - start) / batch)
    return {name: statistics.median(t) for name, t in times.items()}


def matmul_peak(dtype: str, n: int = 4096, reps: int = 3) -> float:
    """GFLOP/s of NumPy's matrix product of two n × n matrices, best of `reps` (all threads)."""
    a = np.ones((n, n), dtype)
    b = np.ones((n, n), dtype)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(reps))
    return 2 * n**3 / best / 1e9


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))


def peak_during(call) -> int:
    """Bytes by which the resident set grew at its highest while `call` ran (Linux: the kernel's
    own high-water mark, reset just before)."""
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current resident size
    base = _status("VmRSS")
    result = call()
    peak = _status("VmHWM")
    del result
    return max(0, peak - base)


def probe_memory(case: str, dtype: str, contender: str, timeout: float = 3600) -> int | None:
    """Peak memory of one call in a fresh interpreter (`python -m bench --probe …`), or None."""
    if not os.path.exists("/proc/self/clear_refs"):
        return None
    cmd = [sys.executable, "-m", "bench", "--probe", case, dtype, contender]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        return json.loads(done.stdout.strip().splitlines()[-1])["peak"]
    except (subprocess.SubprocessError, ValueError, IndexError, KeyError):
        return None


def fresh_probe(module: str, *args: str) -> dict:
    """`python -m MODULE --probe ARGS` in a fresh process from the checkout; its last line (JSON)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-m", module, "--probe", *args], capture_output=True, text=True,
                          cwd=root, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def probed(contender: str, attnsim, transformers_call, *args):
    """One contender's call in this fresh process, after its imports (and, for attnsim, its kernels):
    (what it returned, seconds, bytes the resident set grew at its highest)."""
    if contender == "attnsim":
        from .__main__ import _warm
        _warm("float64")                      # kernels loaded (or compiled once) before timing
        import tracer.models.layer  # noqa: F401
        call = attnsim
    else:
        import torch  # noqa: F401
        import transformers  # noqa: F401
        call = transformers_call
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")                          # the kernel's high-water mark, from here on
    base = _status("VmRSS")
    start = time.perf_counter()
    got = call(*args)
    return got, time.perf_counter() - start, _status("VmHWM") - base
