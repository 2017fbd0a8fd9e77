"""Start-up: `attnsim show by_hand` with the kernels cached, and with an empty cache (every kernel
it needs compiled), against `python -c "import numpy"`, each in a fresh process. A one-shot tiny
trace runs its kernels uncompiled (numba is never loaded), so the same trace forced onto the
compiled kernels (engine="stages") is timed too: what numba itself costs at start-up."""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHOW = [sys.executable, "-m", "tui", "show", "by_hand"]
COMPILED = [sys.executable, "-c", "import tracer; tracer.run('by_hand', engine='stages')"]
WARMUP = [sys.executable, "-m", "tracer.kernels.warmup"]     # the background compile: two processes
WARMUP_ONE = [sys.executable, "-c", "from tracer.kernels import warmup; warmup.compile_all()"]  # in one


def _seconds(cmd: list[str], env: dict | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def measure(reps: int = 7, empty_reps: int = 2) -> dict[str, float]:
    """Median wall-clock seconds of each command, cached and (in a fresh cache folder) empty."""
    numpy = [sys.executable, "-c", "import numpy"]
    _seconds(SHOW), _seconds(COMPILED)  # fill the ordinary cache if needed
    runs = [(_seconds(numpy), _seconds(SHOW), _seconds(COMPILED)) for _ in range(reps)]  # interleaved
    empty = {"empty": [], "compiled_empty": [], "warmup": [], "warmup_one": []}
    for _ in range(empty_reps):
        for key, cmd in (("empty", SHOW), ("compiled_empty", COMPILED), ("warmup", WARMUP), ("warmup_one", WARMUP_ONE)):
            with tempfile.TemporaryDirectory() as cache:
                empty[key].append(_seconds(cmd, {**os.environ, "NUMBA_CACHE_DIR": cache}))
    med = lambda i: statistics.median(r[i] for r in runs)  # noqa: E731
    return {"numpy": med(0), "cached": med(1), "compiled": med(2),
            **{key: statistics.median(v) for key, v in empty.items()}}


def table(m: dict[str, float]) -> str:
    rows = [("`python -c \"import numpy\"`", m["numpy"], "1.00", ""),
            ("`attnsim show by_hand`, kernels cached", m["cached"], f"{m['cached'] / m['numpy']:.2f} × numpy",
             "≤ 6 × numpy"),
            ("`attnsim show by_hand`, empty cache", m["empty"], f"{m['empty'] / m['cached']:.2f} × cached",
             "≤ 10 × cached"),
            ("the by_hand trace on compiled kernels (`engine=\"stages\"`), cached", m["compiled"],
             f"{m['compiled'] / m['numpy']:.2f} × numpy", ""),
            ("the same, empty cache (8 kernels compiled)", m["compiled_empty"],
             f"{m['compiled_empty'] / m['compiled']:.2f} × cached", ""),
            ("the background compile of every kernel (`python -m tracer.kernels.warmup`), one process per dtype",
             m["warmup"], f"{m['warmup'] / m['warmup_one']:.2f} × in one process", ""),
            ("the same compile in one process", m["warmup_one"], "1.00", "")]
    lines = ["| start-up | median | ratio | target |", "| --- | --- | --- | --- |"]
    lines += [f"| {what} | {sec:.2f} s | {ratio} | {target} |" for what, sec, ratio, target in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(measure()))
