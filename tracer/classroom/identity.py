"""Which scenario a set of answers belongs to: a short fingerprint of the numbers a student is
given (input, weights, biases, mask, layout), the same however the file spells them."""
from __future__ import annotations

import hashlib
import json

import numpy as np

GIVEN = ("x", "context", "w_q", "w_k", "w_v", "w_v_down", "w_v_up", "w_o", "b_q", "b_k", "b_v", "b_o")


def fingerprint(scenario) -> str:
    """16 hex digits of a SHA-256 over the given arrays (rows orientation, float64), the mask and
    the layout: equal for two files that give the same numbers, different for any other sheet."""
    h = hashlib.sha256()
    mask = scenario.mask if isinstance(scenario.mask, str) else np.asarray(scenario.mask, bool).tolist()
    h.update(json.dumps({"layout": scenario.layout, "mask": mask, "v_is_k": scenario.v_is_k}).encode())
    for name in GIVEN:
        a = getattr(scenario, name)
        if a is not None:
            a = np.ascontiguousarray(a, dtype=np.float64) + 0.0   # −0.0 is 0
            h.update(f"{name}{a.shape}".encode())
            h.update(a.tobytes())
    return h.hexdigest()[:16]
