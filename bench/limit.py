"""`python -m bench.limit`: a full trace against the machine's own limit, measured in the same run.

The limit of a trace is the fewest GEMM FLOPs its layer needs (the projections, and the score and
weight products over the causal triangle only: `bench.cases.flops`) at the best GEMM rate reached
here (a 2048³ float32 matrix product on every thread, PyTorch when installed, else NumPy), plus the
trace's bytes at the rate memory takes writes: the best of one core's (`fill`) and every core's (a
numba `prange` fill, PyTorch's `fill_`, and a numba fill by streaming stores, which skip the read of
each line that an ordinary store makes first: the trace writes its steps so), each over a buffer
touched beforehand. One core cannot saturate memory on a many-core machine, so a limit counted with
one core's rate is no limit there; nor is one counted with ordinary stores for a trace that streams.
The contenders run in turn, one of each per round; the figure is the median trace time ÷ the limit.
A second limit adds the masked half of the score product: the `scores` step records q·k for every
pair, masked or not (the mask is its own step), so a full trace cannot skip it. The linear twin
(issue 33's delta rule at GPT-2 small's shapes) counts its recurrence and its implicit weights
instead of the scores (`linear_flops`).

    python -m bench.limit                 # gpt2_small (standard and online), its linear twin, 4096 tokens
    python -m bench.limit --case gpt2_small --reps 9
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import time

import numpy as np

import tracer

GEMM_N = 2048
WRITE_BYTES = 256 << 20   # the rate is the same for any buffer well beyond the caches


def gemm():
    """A 2048³ float32 product and its FLOPs."""
    try:
        import torch
        a, b = torch.ones(GEMM_N, GEMM_N), torch.ones(GEMM_N, GEMM_N)
        return (lambda: torch.mm(a, b)), 2 * GEMM_N ** 3
    except ImportError:
        a, b = np.ones((GEMM_N, GEMM_N), np.float32), np.ones((GEMM_N, GEMM_N), np.float32)
        return (lambda: a @ b), 2 * GEMM_N ** 3


def writers() -> dict:
    """Ways to write WRITE_BYTES: one core's, and every core's where a library spreads the work."""
    buf = np.empty(WRITE_BYTES // 4, np.float32)
    buf.fill(0.0)   # touched: the first touch of fresh memory costs far more than a write
    ways = {"write, one core": lambda: buf.fill(1.0)}
    from numba import njit, prange

    @njit(parallel=True)
    def fill(a, value):
        for i in prange(a.size):
            a[i] = value
    ways["write, numba prange"] = lambda: fill(buf, np.float32(2.0))
    ways["write, numba streaming"] = streaming(buf)
    try:
        import torch
        t = torch.from_numpy(buf)
        ways["write, torch fill_"] = lambda: t.fill_(3.0)
    except ImportError:
        pass
    return ways


def streaming(buf: np.ndarray):
    """A call that writes every float32 of `buf` (touched beforehand) on numba's threads by streaming
    stores, which skip the caches as the trace's steps do (tracer/kernels/simd.py)."""
    from numba import njit, prange

    from tracer.kernels.simd import fence, stream

    @njit(parallel=True)
    def streamed(a, row):
        for r in prange(a.shape[0]):
            stream(a[r], row)
        fence()
    cut = buf.size - buf.size % 4096
    rows, row = buf[:cut].reshape(-1, 4096), np.full(4096, 4.0, np.float32)
    return lambda: streamed(rows, row)


def best(call, reps: int = 5) -> float:
    """The fewest seconds `call` took in `reps` runs after one to warm it."""
    call()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def copy_rate(reps: int = 5) -> float:
    """Bytes a second that memory reads and writes at once (a 256 MiB copy, the best of one core's
    and numba's threads'): what turning a checkpoint's tensors into float64 arrays streams."""
    from numba import njit, prange

    @njit(parallel=True)
    def copy(dst, src):
        for i in prange(src.size):
            dst[i] = src[i]
    src, dst = np.ones(WRITE_BYTES // 4, np.float32), np.zeros(WRITE_BYTES // 4, np.float32)
    seconds = min(best(lambda: np.copyto(dst, src), reps), best(lambda: copy(dst, src), reps))
    return 2 * WRITE_BYTES / seconds   # read and written


def gemm_rate(reps: int = 5) -> float:
    """FLOP/s of a 2048³ float32 product on every thread, the best of `reps`."""
    mm, work = gemm()
    return work / best(mm, reps)


def cores() -> str:
    import numba
    try:
        import torch
        threads = f"torch {torch.get_num_threads()} threads, "
    except ImportError:
        threads = ""
    return f"{os.cpu_count()} cores ({threads}numba {numba.get_num_threads()} threads)"


def linear_layer(tokens: int = 1024):
    """GPT-2 small's shapes as a linear layer (issue 33): the delta rule, q and k L2-normed, one decay
    and one β for every token (the recurrence's cost does not depend on their values)."""
    from tracer.scenario import build
    random = dict(seed=2019, tokens=tokens, d_model=768, heads=12, d_k=64, output=True, dtype="float32")
    return build({"name": "gpt2_linear", "random": random, "defaults": {"dtype": "float32"},
                  "linear": {"rule": "delta", "decay": 0.9, "beta": 0.5, "l2": True}})


def linear_flops(sc) -> float:
    """The projections and W_O and the recurrence (per token and head: the decay, the prediction Sᵀk,
    the write and the read Sᵀq, 7·d_k·d_v). The trace builds each head's states and implied weights
    when they are first read, so neither is counted (nor their bytes: held_bytes is what it holds)."""
    from .cases import flops
    n, h = sc.n, sc.heads
    attention = 2 * h * n * (n + 1) / 2 * (sc.d_k + sc.d_v)
    return flops(sc, causal=True) - attention + 7 * n * h * sc.d_k * sc.d_v


def contenders(case: str, algorithm: str):
    from .cases import CASES, flops
    if case == "gpt2_linear":
        sc = linear_layer()
        run = lambda: tracer.run(sc, dtype="float32", lazy=False)   # noqa: E731
        return run, linear_flops(sc), run().held_bytes(), 0.0
    sc = CASES[case].scenario("float32")
    kw = dict(algorithm="online", block=64) if algorithm == "online" else {}
    run = lambda: tracer.run(sc, dtype="float32", lazy=False, **kw)   # noqa: E731
    held = run().held_bytes()
    # the `scores` step holds q·k of every pair, masked or not: the masked half is work a trace must do
    shown = 2 * sc.heads * (sc.n * sc.n - sc.n * (sc.n + 1) / 2) * sc.d_k if algorithm == "standard" else 0.0
    return run, flops(sc, causal=True), held, shown


def measure(case: str, algorithm: str, reps: int) -> dict:
    trace, work, held, shown = contenders(case, algorithm)
    mm, mm_flops = gemm()
    calls = {"trace": trace, "gemm": mm, **writers()}
    for call in calls.values():
        call()
    times = {name: [] for name in calls}
    for _ in range(reps):
        for name, call in calls.items():
            gc.collect()
            time.sleep(0.1)   # the previous contender's idle threads go to sleep
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    rate = mm_flops / min(times["gemm"])
    writes = {name: WRITE_BYTES / min(t) for name, t in times.items() if name.startswith("write")}
    write_rate = max(writes.values())
    limit = work / rate + held / write_rate
    t = statistics.median(times["trace"])
    full = limit + shown / rate
    return dict(case=case, algorithm=algorithm, trace=t, limit=limit, ratio=t / limit, gflops=rate / 1e9,
                gbps=write_rate / 1e9, compute=work / rate, write=held / write_rate, mib=held / 2 ** 20,
                full=full, full_ratio=t / full, writes=writes)


def table(rows: list[dict]) -> str:
    lines = ["| trace | time | limit = GEMM FLOPs + bytes written | ratio | with every pair's score | ratio |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['case']} {r['algorithm']} | {r['trace'] * 1e3:.1f} ms | {r['limit'] * 1e3:.1f} ms = "
                     f"{r['compute'] * 1e3:.1f} ms at {r['gflops']:.0f} GFLOP/s + {r['mib']:.0f} MiB at "
                     f"{r['gbps']:.1f} GB/s ({r['write'] * 1e3:.1f} ms) | {r['ratio']:.2f} | {r['full'] * 1e3:.1f} ms | "
                     f"{r['full_ratio']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.limit", description=__doc__.split("\n\n")[0])
    p.add_argument("--case", action="append", choices=["gpt2_small", "gpt2_long", "gpt2_linear"])
    p.add_argument("--reps", type=int, default=7)
    args = p.parse_args(argv)
    rows = []
    for case in args.case or ["gpt2_small", "gpt2_linear", "gpt2_long"]:
        for algorithm in ("standard", "online") if case == "gpt2_small" else ("standard",):
            rows.append(measure(case, algorithm, args.reps if case != "gpt2_long" else min(args.reps, 3)))
            gc.collect()
    print(f"# {cores()}\n")
    print(table(rows))
    print("\nwrite rates (GB/s): " + ", ".join(f"{k.split(', ')[1]} {v / 1e9:.1f}" for k, v in rows[0]["writes"].items()))
    print("goals (issue 38): standard trace ≤ 1.25 × its limit, online ≤ 1.5 × its own")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
