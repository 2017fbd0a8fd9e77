"""The benchmark cases: the classroom exercise and three model-sized layers (random weights from a
seed), each as a tracer Scenario, with the floating-point work one forward pass needs."""
from __future__ import annotations

from dataclasses import dataclass

import tracer
from tracer.scenario import build


@dataclass(frozen=True)
class Case:
    name: str
    about: str
    spec: dict | str        # a built-in scenario's name, or a [random] section
    reps: int               # timed runs per contender (after one warm-up)
    batch: int = 1          # calls per timed run (tiny cases: the mean of many)

    def scenario(self, dtype: str) -> tracer.Scenario:
        if isinstance(self.spec, str):
            return tracer.load_scenario(self.spec)
        random = {**self.spec, "dtype": dtype}
        return build({"name": self.name, "mask": "causal", "random": random, "defaults": {"dtype": dtype}})


def _layer(tokens, d_model, heads, d_k, seed):
    return dict(seed=seed, tokens=tokens, d_model=d_model, heads=heads, d_k=d_k, output=True)


CASES = {c.name: c for c in [
    Case("by_hand", "the classroom exercise: 4 tokens, d_model 6, d_k 3, by-hand arithmetic", "by_hand",
         reps=15, batch=200),
    Case("gpt2_small", "GPT-2 small layer: 1024 tokens, d_model 768, 12 heads × 64, causal",
         _layer(1024, 768, 12, 64, 2019), reps=9),
    Case("gpt2_long", "the same model, 4096 tokens", _layer(4096, 768, 12, 64, 2019), reps=3),
    Case("gpt3_layer", "GPT-3 175B layer: 2048 tokens, d_model 12288, 96 heads × 128, causal",
         _layer(2048, 12288, 96, 128, 2020), reps=2),
]}
QUICK = ("by_hand", "gpt2_small")


def flops(sc: tracer.Scenario, causal: bool) -> float:
    """Multiply-adds ×2 of one forward pass: projections, the attended query–key pairs (half
    the square under a causal mask) for scores and weighted sums, and the output projection."""
    n, h = sc.n, sc.heads
    pairs = n * (n + 1) / 2 if causal else n * n
    work = 2 * n * sc.d_model * h * (2 * sc.d_k + sc.d_v) + 2 * h * pairs * (sc.d_k + sc.d_v)
    if sc.w_o is not None:
        work += 2 * n * h * sc.d_v * sc.d_out
    return work
