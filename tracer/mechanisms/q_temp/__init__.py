"""The query temperature of Llama 4's layers without positions (CONTRACT §17): each query is
multiplied by τ(p) = 1 + β·ln(1 + ⌊(p + o)/F⌋), which grows with its position p, so that far into a
long text the softmax stays sharp. Mistral 4 warms every layer's queries the same way (o = 0).

A scenario file writes `[rope] temperature = { scale = β, floor = F }` (optional `shift = o`,
default 1, Llama 4's); `[rope] dims = 0` gives positions that do not turn (Llama 4's NoPE layers),
the first at `[rope] offset`. Its steps: `tau` (each token's τ) and `h{h}.q_temp` after the
queries' last stage. The formula is in formula.py."""
from __future__ import annotations

from ..declaration import Mechanism
from .formula import first_warm
from .steps import read


def said(arrays: dict) -> str | None:
    """A checkpoint layer's temperature in words, and whether this text is long enough to feel it."""
    t = (arrays.get("rope") or {}).get("temperature")
    if t is None:
        return None
    shift = t.get("shift", 1)
    inside = f"(p + {shift})" if shift else "p"
    words = f"its queries are multiplied by τ(p) = 1 + {t['scale']:g}·ln(1 + ⌊{inside}/{t['floor']:g}⌋) (q_temp)"
    first = first_warm(t["scale"], t["floor"], shift)
    return words + (": 1 on this text" if len(arrays["x"]) <= first else "")

DECLARATION = Mechanism(
    "q_temp", "a query temperature", field="q_temp", label="rope.temperature", read=read,
    dims=lambda sc: (sc.q_temp["scale"], sc.q_temp["floor"], sc.q_temp["shift"]),
    describe=lambda sc: {key: sc.q_temp[key] for key in ("scale", "floor", "shift")}, describe_key="temperature",
    unfillable=lambda sc: "the query temperature multiplies by 1 + β·ln(…), a logarithm, which is not a fraction",
    decode=False, said=said)
