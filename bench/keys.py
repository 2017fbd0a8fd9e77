"""How the TUI feels under the keys (issue 24, goals 1 and 2; issue 38, goal 4): each key sent
through tmux to the app in a 160 × 50 terminal, timed from the send until the screen last changed
(it must then stay the same for SETTLED seconds). The classroom exercise and GPT-2-small run side by
side, one key to each per round, so both see the same machine; the figures are medians and their
ratios. Each round walks `n` through every step of head 0 and `p` all the way back, then moves the
cursor, the head and the arithmetic; the slowest step of the walk is reported beside the median.

    python -m bench.keys               # 3 rounds
    python -m bench.keys --rounds 7
"""
from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTLED = 0.25     # the screen unchanged this long: the key's work is done
SWAP_SETTLED = 1.5   # a swap recomputes off the screen's thread: wait longer for its last change
POLL = 0.004
SCENARIOS = ("by_hand", "gpt2_small")
# what each round sends after its walk through the steps, in order, and the name it is reported under
KEYS = [("Right", "cursor"), ("Down", "cursor"), ("]", "head"), ("[", "head"), ("a", "swap"), ("a", "swap")]
SHOWN = "swap, until shown"   # the status line names the new arithmetic (the rest computes after)
KINDS = ["step", *dict.fromkeys(kind for _, kind in KEYS), SHOWN]


def step_ids(name: str) -> list[str]:
    """The steps `n` walks through on head 0, as the app lists them."""
    import tracer
    from tui.session import head_steps
    return [s.id for s in head_steps(tracer.run(tracer.load_scenario(name)), 0)]


def walk(sessions: dict, ids: dict, times: dict, slowest: dict) -> None:
    """`n` through every step, then `p` back to the first; the scenarios take turns key by key."""
    for key, order in (("n", lambda seq: seq[1:]), ("p", lambda seq: seq[-2::-1])):
        todo = {name: order(ids[name]) for name in sessions}
        for i in range(max(map(len, todo.values()))):
            for name, session in sessions.items():
                if i < len(todo[name]):
                    last, _ = _key(session, key)
                    times[name, "step"].append(last)
                    slowest[name][todo[name][i]].append(last)


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=30).stdout


def _screen(session: str) -> str:
    return _tmux("capture-pane", "-p", "-e", "-t", session)


def _wait_still(session: str, timeout: float = 300.0) -> str:
    """Until the screen stays the same for SETTLED seconds."""
    last, since, end = _screen(session), time.perf_counter(), time.perf_counter() + timeout
    while time.perf_counter() < end:
        time.sleep(POLL)
        now = _screen(session)
        if now != last:
            last, since = now, time.perf_counter()
        elif time.perf_counter() - since >= SETTLED:
            return last
    raise TimeoutError(f"{session}: the screen never settled")


def _key(session: str, key: str, settled: float = SETTLED) -> tuple[float, float]:
    """Seconds from sending `key` until the screen's last change, and until the top line (the
    status: scenario, step, head, arithmetic) first changed (nan if it did not)."""
    before = _screen(session)
    start = time.perf_counter()
    _tmux("send-keys", "-t", session, key)
    changed, last, top = None, before, float("nan")
    while True:
        time.sleep(POLL)
        now = _screen(session)
        if now != last:
            last, changed = now, time.perf_counter()
            if math.isnan(top) and now.split("\n", 1)[0] != before.split("\n", 1)[0]:
                top = changed - start
        elif changed is not None and time.perf_counter() - changed >= settled:
            return changed - start, top
        elif changed is None and time.perf_counter() - start > 30:
            return float("nan"), float("nan")   # the key changed nothing on screen


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if shutil.which("tmux") is None:
        print("bench.keys needs tmux (apt-get install tmux)", file=sys.stderr)
        return 2
    sessions = {name: f"attnsim-keys-{name}-{os.getpid()}" for name in SCENARIOS}
    try:
        for name, session in sessions.items():
            _tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "50", "-c", ROOT,
                  f"{sys.executable} -m tui tui {name}")
        for session in sessions.values():
            _wait_still(session)
        times = {(name, kind): [] for name in SCENARIOS for kind in KINDS}
        ids = {name: step_ids(name) for name in SCENARIOS}
        slowest = {name: {step: [] for step in ids[name]} for name in SCENARIOS}
        for _ in range(args.rounds):
            walk(sessions, ids, times, slowest)
            for key, kind in KEYS:
                for name, session in sessions.items():
                    if kind == "head" and name == "by_hand":
                        continue   # one head: the key only says so
                    last, top = _key(session, key, SWAP_SETTLED if kind == "swap" else SETTLED)
                    times[name, kind].append(last)
                    if kind == "swap":   # the new arithmetic on screen, before the other heads are done
                        times[name, SHOWN].append(top)
    finally:
        for session in sessions.values():
            _tmux("kill-session", "-t", session)
    print(f"# keys through tmux, 160 × 50, median of {args.rounds} rounds (ms until the screen last changed)\n")
    print("| key | " + " | ".join(SCENARIOS) + " | gpt2_small ÷ by_hand's step |")
    print("| --- | " + " | ".join("---" for _ in SCENARIOS) + " | --- |")
    step = statistics.median(times["by_hand", "step"])
    for kind in KINDS:
        seen = {name: [t for t in times[name, kind] if not math.isnan(t)] for name in SCENARIOS}   # nan: no change
        ms = {name: statistics.median(seen[name]) if seen[name] else float("nan") for name in SCENARIOS}
        print(f"| {kind} | " + " | ".join("—" if ms[n] != ms[n] else f"{1000 * ms[n]:.0f}" for n in SCENARIOS)
              + f" | {ms['gpt2_small'] / step:.2f} |")
    for name in SCENARIOS:
        per_step = {sid: statistics.median(t) for sid, t in slowest[name].items() if t}
        worst = max(per_step, key=per_step.get)
        print(f"\n{name}: {len(ids[name])} steps on head 0; the slowest, {worst}, "
              f"{1000 * per_step[worst]:.0f} ms ({per_step[worst] / step:.2f} × by_hand's step); each, reached by n or p:\n  "
              + ", ".join(f"{sid} {1000 * t:.0f}" for sid, t in per_step.items()))
    print("\ngoals: step (every one of them), cursor and head ≤ 1.5 × by_hand's step; swap until shown ≤ 4 × (the last change,"
          " `swap`, comes when the other heads are computed and the status line clears)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
