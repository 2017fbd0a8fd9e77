"""`python -m bench.tui_keys`: how the TUI feels under the keys, GPT-2-small beside the classroom
exercise in the same run. The app runs headless at 160 × 50 (Textual's Pilot); each key's time runs
from the key press until the screen has changed and settled (no worker left, nothing left to draw).

Each figure is a ratio gpt2_small ÷ by_hand of the median over rounds, the scenarios taken in turn
within a round, so that a busy moment of the shared machine falls on all alike. The head switch
(`]`) is compared with multi_head's (by_hand has one head: there `]` changes nothing); the swap (`a`,
twice: there and back) with a step of by_hand. Keys come `--gap` seconds apart (a
brisk person's pace); work the app does in the background between keys is not counted, work a key
waits for is.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import time

SIZE = (160, 50)
KEYS = {"step n": ["n"], "step p": ["p"], "cursor": ["right"], "head": ["right_square_bracket"],
        "scroll": ["pagedown"]}
# by_hand has one head (`]` changes nothing there): a head switch is compared with multi_head's,
# the classroom's two-head exercise
SCENARIOS = ("by_hand", "multi_head", "gpt2_small")
CLASSROOM = {"head": "multi_head"}
SWAP = "swap a"                       # until the screen shows the new arithmetic
REST = "swap a, every head computed"  # until the background has computed the other heads too


async def _settle(pilot, rest: bool = True) -> None:
    """Until nothing is left to draw and no worker runs; with `rest` False, a background worker
    completing a trace already on screen (group "rest") is not waited for."""
    app = pilot.app
    while True:
        await pilot.pause()
        busy = [w for w in app.workers._workers if rest or w.group != "rest"]
        if busy:
            await app.workers.wait_for_complete(busy)
        await pilot.pause()
        if not [w for w in app.workers._workers if rest or w.group != "rest"] and getattr(app.screen, "trace", True) is not None:
            app.screen._compositor.render_update(full=True)   # what a terminal would be sent
            return
        await asyncio.sleep(0.002)


async def _timed(pilot, key: str, gap: float = 0.0, rest: bool = True) -> float:
    await asyncio.sleep(gap)   # a person's pace between keys: what the app does meanwhile is free
    await _settle(pilot)
    start = time.perf_counter()
    await pilot.press(key)
    await _settle(pilot, rest)
    return time.perf_counter() - start


async def _session(name: str, rounds: int, out: dict, gap: float) -> None:
    from tui.app import AttnApp
    app = AttnApp(name)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(pilot)
        screen = app.screen
        for _ in range(2):  # warm: every widget drawn once, the kernels of both presets loaded
            await _timed(pilot, "n")
            await _timed(pilot, "a")
        for _ in range(rounds):
            screen.go("scores[0]" if "scores[0]" in screen.trace else screen.step_id)
            await _settle(pilot)
            for what, keys in KEYS.items():
                for key in keys:
                    out.setdefault((name, what), []).append(await _timed(pilot, key, gap))
            for _ in range(2):   # there and back
                await asyncio.sleep(gap)
                await _settle(pilot)
                start = time.perf_counter()
                await pilot.press("a")
                await _settle(pilot, rest=False)
                out.setdefault((name, SWAP), []).append(time.perf_counter() - start)
                await _settle(pilot)
                out.setdefault((name, REST), []).append(time.perf_counter() - start)


def run(rounds: int, gap: float) -> dict:
    """Median seconds per key and scenario. The scenarios alternate round by round."""
    times: dict = {}
    for _ in range(rounds):
        for name in SCENARIOS:
            got: dict = {}
            asyncio.run(_session(name, 1, got, gap))
            for k, v in got.items():
                times.setdefault(k, []).extend(v)
    return {k: statistics.median(v) for k, v in times.items()}


def table(med: dict) -> str:
    lines = ["| key | classroom | gpt2_small | ratio | target |", "| --- | --- | --- | --- | --- |"]
    step = med[("by_hand", "step n")]
    for what in [*KEYS, SWAP, REST]:
        b, g = med[(CLASSROOM.get(what, "by_hand"), what)], med[("gpt2_small", what)]
        base, target = ((step, "≤ 4 × a by_hand step") if what == SWAP else (step, "(÷ a by_hand step)")
                        if what == REST else (b, "≤ 1.5"))
        lines.append(f"| {what} | {b * 1e3:.1f} ms | {g * 1e3:.1f} ms | {g / base:.2f} | {target} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.tui_keys", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--gap", type=float, default=0.25, help="seconds between keys (default 0.25: a brisk pace)")
    args = p.parse_args(argv)
    print(table(run(args.rounds, args.gap)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
