"""`python -m bench.model_view`: `attnsim model` (tracer.model_view: every layer once, the checkpoint
streamed block by block) on 256 tokens of two checkpoints with random weights written by this
script to a temporary folder: GPT-2 small's shapes (12 layers, float32) and a 1B-class one with
Llama-3.2-1B's shapes (16 layers, bfloat16, bench/llama.py's writer). Against it: tracing the
layers one by one (tracer.from_model + tracer.run for each layer, each running the blocks before
it again), and tracing the last layer alone. Each run is a fresh process, timed after its imports;
peak memory is the growth of the resident set, set beside one block's tensors in float64 (what
attnsim holds of a block: the goal is at most 1.5 ×).

    python -m bench.model_view                 # both checkpoints (the 1B one: 2.5 GB written, minutes)
    python -m bench.model_view --only gpt2     # GPT-2 small's shapes only
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from .measure import _status, fresh_probe

TOKENS = 256
TEXT = " ".join(f"w{i % 50}" for i in range(TOKENS))   # one word-level token per word
WAYS = ("model view", "last layer", "layers one by one")


def write(kind: str, folder: Path) -> None:
    if kind == "gpt2":
        from .models import write_checkpoint
        write_checkpoint(str(folder))
    else:
        from .llama import write_checkpoint
        write_checkpoint(folder)


def block_bytes(folder: Path) -> int:
    """Block 0's tensors (its norms, attention and MLP) in float64: what attnsim holds of a block."""
    from tracer.models.blocks import prefix, shapes
    from tracer.models.config import read_config
    from tracer.models.weights import Tensors
    cfg = read_config(folder)
    want = shapes(cfg, prefix(Tensors(folder), cfg), 0, mlp=True)
    return 8 * sum(math.prod(s) for s in want.values())


def _way(way: str, folder: str):
    import tracer
    if way == "model view":
        return tracer.model_view(folder, TEXT)
    layers = tracer.from_model(folder, TEXT, 0).model["layers"]
    chosen = [layers - 1] if way == "last layer" else range(layers)
    return [tracer.run(tracer.from_model(folder, TEXT, n))["h0.weights"].sum() for n in chosen]


def probe(way: str, folder: str) -> None:
    """One way, in this fresh process: its seconds and the resident set's growth at its highest."""
    import tracer
    import tracer.model_view  # noqa: F401
    from .__main__ import _warm
    _warm("float64")   # the tracer's kernels loaded (or compiled once) before any timing
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = _status("VmRSS")
    start = time.perf_counter()
    got = _way(way, folder)
    seconds = time.perf_counter() - start
    layers = len(got.layers) if way == "model view" else None
    print(json.dumps({"seconds": seconds, "peak": _status("VmHWM") - base, "layers": layers}))


def forward_flops(folder: Path) -> float:
    """Multiply-adds × 2 of one forward pass of every layer on TOKENS tokens: the projections, the
    attended pairs of the causal triangle (scores and weighted sums), the output projection and the
    MLP (two matrices, three when gated)."""
    from tracer.models.config import read_config
    cfg = read_config(folder)
    n, d, h, g, dh = TOKENS, cfg.d_model, cfg.heads, cfg.groups, cfg.head_dim
    pairs = n * (n + 1) / 2
    gated = cfg.activation == "silu"
    layer = (2 * n * d * dh * (2 * h + 2 * g) + 4 * h * pairs * dh
             + 2 * n * d * cfg.inner * (3 if gated else 2))
    return cfg.layers * layer


def checkpoint_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.glob("*.safetensors"))


def limit(folder: Path) -> tuple[float, str]:
    """The model view's own limit (issue 38, goal 6), measured now: every layer's forward FLOPs at
    the GEMM rate of every thread, plus the checkpoint's bytes streamed once at memory's copy rate."""
    from .limit import copy_rate, gemm_rate
    rate, copy = gemm_rate(), copy_rate()
    work, size = forward_flops(folder), checkpoint_bytes(folder)
    seconds = work / rate + size / copy
    return seconds, (f"{work / 1e9:.1f} GFLOP at {rate / 1e9:.0f} GFLOP/s + {size / 2**30:.2f} GiB read at "
                     f"{copy / 1e9:.1f} GB/s")


def measure(kind: str, folder: Path, reps: int) -> list[str]:
    """The table's rows for one checkpoint."""
    print(f"bench.model_view: writing {kind}'s checkpoint …", file=sys.stderr, flush=True)
    write(kind, folder)
    block = block_bytes(folder)
    runs = {w: [] for w in WAYS}
    for _ in range(reps):
        for way in WAYS:
            print(f"bench.model_view: {kind}, {way} …", file=sys.stderr, flush=True)
            runs[way].append(fresh_probe("bench.model_view", way, str(folder)))
    bound, how = limit(folder)
    t = {w: statistics.median(r["seconds"] for r in runs[w]) for w in WAYS}
    m = {w: statistics.median(r["peak"] for r in runs[w]) for w in WAYS}
    layers = runs["model view"][0]["layers"]
    gib = lambda b: f"{b / 2**30:.2f} GiB"  # noqa: E731
    name = {"gpt2": "GPT-2 small shapes (float32)", "llama": "Llama-3.2-1B shapes (bfloat16)"}[kind]
    return [f"| {name}, {layers} layers | {w} | {t[w]:.1f} | {t[w] / t['model view']:.2f} | {gib(m[w])} | "
            f"{m[w] / block:.2f} |" for w in WAYS] + \
        [f"| | one block in float64: {gib(block)}; model view a layer: {t['model view'] / layers:.2f} s "
         f"(the last layer traced alone: {t['last layer']:.1f} s) | | | | |",
         f"| | the model view's limit: {bound:.2f} s = {how}; model view ÷ limit {t['model view'] / bound:.1f} | | | | |"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.model_view", description=__doc__.split("\n")[0])
    p.add_argument("--only", choices=["gpt2", "llama"], help="one checkpoint (default both)")
    p.add_argument("--reps", type=int, default=1, help="fresh runs of each way (default 1)")
    p.add_argument("--probe", nargs=2, metavar=("WAY", "FOLDER"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.probe:
        probe(*args.probe)
        return 0
    rows = []
    for kind in [args.only] if args.only else ["gpt2", "llama"]:
        with tempfile.TemporaryDirectory(prefix="attnsim-bench-") as folder:
            rows += measure(kind, Path(folder), args.reps)
    print(f"{TOKENS} tokens; median of {args.reps} fresh run(s) each; {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.2f}\n")
    print("| checkpoint | way | seconds | × model view | peak memory | peak ÷ one block |\n| --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
