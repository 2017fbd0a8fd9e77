"""`python -m bench.tui_keys`: how the TUI feels under the keys, GPT-2-small beside the classroom
exercise in the same run. The app runs headless at 160 × 50 (Textual's Pilot); each key's time runs
from the key press until the screen has changed and settled (no worker left, nothing left to draw).

Each figure is a ratio gpt2_small ÷ by_hand of the median over rounds, the two scenarios taken in
turn within a round, so that a busy moment of the shared machine falls on both alike. The swap (`a`,
twice: there and back) is compared with a step of by_hand.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import time

SIZE = (160, 50)
KEYS = {"step n": ["n"], "step p": ["p"], "cursor": ["right"], "head": ["right_square_bracket"],
        "scroll": ["pagedown"]}
SWAP = "swap a"


async def _settle(pilot) -> None:
    app = pilot.app
    while True:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        if not app.workers._workers and getattr(app.screen, "trace", True) is not None:
            app.screen._compositor.render_update(full=True)   # what a terminal would be sent
            return
        await asyncio.sleep(0.002)


async def _timed(pilot, key: str) -> float:
    start = time.perf_counter()
    await pilot.press(key)
    await _settle(pilot)
    return time.perf_counter() - start


async def _session(name: str, rounds: int, out: dict) -> None:
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
                    out.setdefault((name, what), []).append(await _timed(pilot, key))
            for key in ("a", "a"):
                out.setdefault((name, SWAP), []).append(await _timed(pilot, key))


def run(rounds: int) -> dict:
    """Median seconds per key and scenario. The scenarios alternate round by round."""
    times: dict = {}
    for _ in range(rounds):
        for name in ("by_hand", "gpt2_small"):
            got: dict = {}
            asyncio.run(_session(name, 1, got))
            for k, v in got.items():
                times.setdefault(k, []).extend(v)
    return {k: statistics.median(v) for k, v in times.items()}


def table(med: dict) -> str:
    lines = ["| key | by_hand | gpt2_small | ratio | target |", "| --- | --- | --- | --- | --- |"]
    step = med[("by_hand", "step n")]
    for what in [*KEYS, SWAP]:
        b, g = med[("by_hand", what)], med[("gpt2_small", what)]
        base, target = (step, "≤ 4 × a by_hand step") if what == SWAP else (b, "≤ 1.5")
        lines.append(f"| {what} | {b * 1e3:.1f} ms | {g * 1e3:.1f} ms | {g / base:.2f} | {target} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.tui_keys", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    print(table(run(args.rounds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
