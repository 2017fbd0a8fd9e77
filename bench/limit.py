"""`python -m bench.limit`: a full trace against the machine's own limit, measured in the same run.

The limit of a trace is the fewest GEMM FLOPs its layer needs (the projections, and the score and
weight products over the causal triangle only: `bench.cases.flops`) at the best GEMM rate reached
here (a 2048³ float32 matrix product, PyTorch when installed, else NumPy), plus the trace's bytes at
the rate memory takes writes (`fill` over a buffer touched beforehand). The contenders run in turn,
one of each per round; the figure is the median trace time ÷ the limit. A second limit adds the
masked half of the score product: the `scores` step records q·k for every pair, masked or not
(the mask is its own step), so a full trace cannot skip it.

    python -m bench.limit                 # gpt2_small (standard and online), then 4096 tokens
    python -m bench.limit --case gpt2_small --reps 9
"""
from __future__ import annotations

import argparse
import gc
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


def writer():
    buf = np.empty(WRITE_BYTES // 4, np.float32)
    buf.fill(0.0)   # touched: the first touch of fresh memory costs far more than a write
    return lambda: buf.fill(1.0)


def contenders(case: str, algorithm: str):
    from .cases import CASES, flops
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
    fill = writer()
    calls = {"trace": trace, "gemm": mm, "write": fill}
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
    write_rate = WRITE_BYTES / min(times["write"])
    limit = work / rate + held / write_rate
    t = statistics.median(times["trace"])
    full = limit + shown / rate
    return dict(case=case, algorithm=algorithm, trace=t, limit=limit, ratio=t / limit, gflops=rate / 1e9,
                gbps=write_rate / 1e9, compute=work / rate, write=held / write_rate, mib=held / 2 ** 20,
                full=full, full_ratio=t / full)


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
    p.add_argument("--case", action="append", choices=["gpt2_small", "gpt2_long"])
    p.add_argument("--reps", type=int, default=7)
    args = p.parse_args(argv)
    rows = []
    for case in args.case or ["gpt2_small", "gpt2_long"]:
        for algorithm in ("standard", "online") if case == "gpt2_small" else ("standard",):
            rows.append(measure(case, algorithm, args.reps if case == "gpt2_small" else min(args.reps, 3)))
            gc.collect()
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
