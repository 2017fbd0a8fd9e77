"""Rotary positions (RoPE; Llama and most of today's checkpoints): each pair of a head's query and
key features turned by an angle that grows with the token's position, so that q·k depends on how
far apart two tokens are. Its parts:

    frequencies.py  which features pair up, each pair's θ_i and their scaling (linear, llama3, yarn)
    rotation.py     the rotation itself: one NumPy formula beside kernels/stages.rotate
    reader.py       the scenario file's [rope] section
    steps.py        the steps freqs, q_rot and k_rot
    checkpoint.py   a checkpoint's rope_parameters / rope_scaling, as config.json spells them"""
from __future__ import annotations

from ..declaration import Mechanism
from . import steps  # noqa: F401  (registers freqs, q_rot and k_rot)
from .frequencies import freeze


def said(spec: dict | None) -> str | None:
    """A checkpoint layer's rotation in words, where it is not the usual one."""
    words = []
    if spec and (spec.get("scaling") or {}).get("type") == "proportional":
        words.append(f"only the first {spec['scaling']['fraction']:g} of each head's pairs turn (proportional rotary)")
    if spec and spec.get("sign") == -1:
        words.append("its rotation turns the other way, by −p·θ")
    return "; ".join(words) or None

DECLARATION = Mechanism(
    "rotary", "rotary positions", field="rope", label="rope", keys=("rope",), arguments={"rope": "rope"},
    dims=lambda sc: freeze(sc.rope), describe=lambda sc: dict(sc.rope), describe_key="rope", describe_early=True,
    unfillable=lambda sc: "rotary positions turn the queries and keys by cosines and sines, which are not fractions",
    checkpoint=lambda blk, cfg, layer: {"rope": cfg.kinds[layer].rope}, said=lambda arrays: said(arrays.get("rope")))
