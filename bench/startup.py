"""Start-up: `attnsim show by_hand` with the kernels cached, and with an empty cache (every kernel
it needs compiled), against `python -c "import numpy"`, each in a fresh process."""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHOW = [sys.executable, "-m", "tui", "show", "by_hand"]


def _seconds(cmd: list[str], env: dict | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def measure(reps: int = 7, empty_reps: int = 2) -> dict[str, float]:
    """Median wall-clock seconds: numpy import, show with the cache warm, show with an empty cache."""
    numpy = [sys.executable, "-c", "import numpy"]
    _seconds(SHOW)  # fills the ordinary cache if needed
    pairs = [(_seconds(numpy), _seconds(SHOW)) for _ in range(reps)]  # interleaved: same noise
    empty = []
    for _ in range(empty_reps):
        with tempfile.TemporaryDirectory() as cache:
            empty.append(_seconds(SHOW, {**os.environ, "NUMBA_CACHE_DIR": cache}))
    return {"numpy": statistics.median(p[0] for p in pairs), "cached": statistics.median(p[1] for p in pairs),
            "empty": statistics.median(empty)}


def table(m: dict[str, float]) -> str:
    rows = [("`python -c \"import numpy\"`", m["numpy"], "1.00", ""),
            ("`attnsim show by_hand`, kernels cached", m["cached"], f"{m['cached'] / m['numpy']:.2f} × numpy",
             "≤ 6 × numpy"),
            ("`attnsim show by_hand`, empty cache", m["empty"], f"{m['empty'] / m['cached']:.2f} × cached",
             "≤ 10 × cached")]
    lines = ["| start-up | median | ratio | target |", "| --- | --- | --- | --- |"]
    lines += [f"| {what} | {sec:.2f} s | {ratio} | {target} |" for what, sec, ratio, target in rows]
    return "\n".join(lines)
