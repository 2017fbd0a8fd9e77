"""The results table (Markdown, so that the terminal and bench/RESULTS.md show the same thing)."""
from __future__ import annotations

import os
import platform
import time

HEADER = ("case", "dtype", "contender", "median", "× PyTorch SDPA", "× NumPy", "GFLOP/s", "% of peak",
          "peak memory")


def duration(seconds: float) -> str:
    for unit, scale in (("s", 1), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale or unit == "µs":
            value = seconds / scale
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"


def size(nbytes) -> str:
    if nbytes is None:
        return "—"
    return f"{nbytes / 2**30:.2f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.0f} MiB"


def row(case, dtype, name, seconds, sdpa, numpy, flops, peak, memory) -> list[str]:
    if isinstance(seconds, str):  # skipped: the reason
        return [case, dtype, name, seconds, "", "", "", "", ""]
    gflops = flops / seconds / 1e9
    ratio = lambda base: f"{seconds / base:.2f}" if isinstance(base, float) else "—"  # noqa: E731
    return [case, dtype, name, duration(seconds), ratio(sdpa), ratio(numpy), f"{gflops:.3g}",
            f"{100 * gflops / peak:.2g}%", size(memory)]


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [list(HEADER)] + rows) for i in range(len(HEADER))]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    rule = "| " + " | ".join("-" * w for w in widths) + " |"
    return "\n".join([line(HEADER), rule] + [line(r) for r in rows])


def machine(peaks: dict) -> str:
    import numba
    import numpy
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = "not installed"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    peak = ", ".join(f"{dtype} {value:.0f} GFLOP/s" for dtype, value in peaks.items())
    return (f"{cpu}, {os.cpu_count()} cores; Python {platform.python_version()}, NumPy {numpy.__version__}, "
            f"numba {numba.__version__}, PyTorch {torch_version}; measured matmul peak: {peak}")


NOTES = """\
- median: of the timed runs, taken round robin after one warm-up each (compiling, first touch),
  each run after a 0.15 s rest (so that no contender pays for the previous one's still-spinning
  BLAS/OpenMP threads); the by-hand case times batches of calls. Ratios compare contenders of
  the same run.
- attnsim traced: `tracer.run(scenario, dtype=...)`, every step recorded (a trace too big for this
  machine's memory is computed head by head, keeping a few heads); untraced: `tracer.attention(...)`,
  the output only.
- NumPy same steps / PyTorch eager steps: the same intermediates (scores, scaled, masked, powers,
  sums, weights, z, concat, out) as separate arrays, in the scenario's arithmetic. PyTorch SDPA:
  `scaled_dot_product_attention` on 4-D tensors (its fused CPU path) with the projections; it
  records nothing and always computes the exact arithmetic (so for by_hand only its time compares).
- GFLOP/s: the same operation count for every contender (projections, the attended query–key pairs,
  output projection), divided by the median; % of peak: of NumPy's measured n × n matmul.
- peak memory: growth of the resident set during one call, in a fresh process, over the inputs."""


def save(path: str, command: str, body: str, peaks: dict) -> None:
    text = (f"# attnsim benchmark results\n\nProduced by `{command}` on {time.strftime('%Y-%m-%d %H:%M')}"
            f"\n\nMachine: {machine(peaks)}.\n\n{body}\n\n{NOTES}\n")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
