"""`python -m bench.projections`: GPT-2 small's q, k and v projection (1024 tokens × 768 features by
768 × 2304, float32), the way the trace computes it against the same product left in one matrix.

The trace keeps each head's q, k and v as a matrix of its own (heads × tokens × 64), so
`kernels.matmul_side` computes one wide product per block of rows into a thread's scratch and copies
it out to the heads. A product left as one tokens × 2304 matrix (numba's threads, NumPy, PyTorch)
skips that copy: the difference is what the per-head layout costs. The same product split by w's
columns instead of by rows shows what the split costs (BLAS packs its right-hand matrix at each
call). Timed in turn (bench.measure), in one run; the ratios are against PyTorch's product, or
NumPy's without PyTorch.

    python -m bench.projections --reps 15
"""
from __future__ import annotations

import argparse

import numpy as np

from .limit import cores
from .measure import round_robin

N, D, HEADS, D_K = 1024, 768, 12, 64


def contenders() -> dict:
    from numba import njit, prange

    from tracer import kernels
    from tracer.kernels import blas

    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, D), np.float32)
    w = rng.standard_normal((D, 3 * HEADS * D_K), np.float32)
    wide_out = np.empty((N, w.shape[1]), np.float32)

    parts = 4   # blocks of columns: every token's row times a quarter of w, into a matrix of its own
    w_parts = np.ascontiguousarray(w.reshape(D, parts, -1).transpose(1, 0, 2))
    part_out = np.empty((parts, N, w_parts.shape[2]), np.float32)

    @njit(parallel=True)
    def rows(x, w, out, block):
        """One product per block of rows, straight into the rows of one matrix."""
        for t in prange((x.shape[0] + block - 1) // block):
            b0 = t * block
            b1 = min(x.shape[0], b0 + block)
            np.dot(x[b0:b1], w, out[b0:b1])

    @njit(parallel=True)
    def columns(x, ws, outs):
        """One product per block of w's columns, each into its own matrix: each thread packs its
        part of w alone, where row blocks make every thread pack all of it."""
        for t in prange(ws.shape[0]):
            np.dot(x, ws[t], outs[t])

    def one_thread(call):   # as the kernels run BLAS: one thread inside each numba thread
        def run():
            with blas.one_thread():
                call()
        return run

    calls = {"attnsim, a matrix a head (matmul_side)": lambda: kernels.matmul_side(x, w, 3 * HEADS),
             "numba's threads, blocks of rows, one matrix":
                 one_thread(lambda: rows(x, w, wide_out, -(-N // kernels._threads()))),
             f"numba's threads, {parts} blocks of columns": one_thread(lambda: columns(x, w_parts, part_out)),
             "NumPy x @ w": lambda: np.matmul(x, w, out=wide_out)}
    try:
        import torch
        tx, tw, tout = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(wide_out)
        calls["PyTorch mm"] = lambda: torch.mm(tx, tw, out=tout)
    except ImportError:
        pass
    return calls


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.projections", description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=15)
    args = p.parse_args(argv)
    times = round_robin(contenders(), args.reps)
    flops = 2 * N * D * 3 * HEADS * D_K
    base = times.get("PyTorch mm", times["NumPy x @ w"])
    print(f"# {cores()}\n")
    print("| q, k, v of GPT-2 small (float32) | median | GFLOP/s | × PyTorch (or NumPy) |\n| --- | --- | --- | --- |")
    for name, t in times.items():
        print(f"| {name} | {t * 1e3:.2f} ms | {flops / t / 1e9:.0f} | {t / base:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
