"""The built-ins that teach today's mechanisms (CONTRACT §13): each against the NumPy layer of
mechanisms_reference (read from the file with tomllib, not the package), under both presets, and the
streaming mask's lesson worked out here by hand (each mechanism's lesson: its own file)."""
from __future__ import annotations

import math
import tomllib

import numpy as np
import pytest

import tracer
from mechanisms_reference import reference
from tracer.scenario import scenarios_dir

BUILTINS = ("qk_norm", "softcap", "alibi", "streaming", "rope_scaling", "rope_scaling_plain", "rope_scaling_linear",
            "rope_scaling_yarn")


def arrays(name: str) -> tuple[dict, str]:
    """The file's layer as the reference's keywords (rows layout), and its mask."""
    data = tomllib.loads((scenarios_dir() / f"{name}.toml").read_text(encoding="utf-8"))
    w = data["weights"]
    heads = lambda m: [np.array(a, float) for a in m] if np.ndim(m) == 3 else [np.array(m, float)]  # noqa: E731
    a = dict(x=np.array(data["x"], float), q=heads(w["q"]), k=heads(w["k"]), v=heads(w["v"]))
    if "q_norm" in w:
        a.update(q_norm=[np.array(w["q_norm"], float)] * len(a["q"]), k_norm=[np.array(w["k_norm"], float)] * len(a["k"]),
                 qk_norm_eps=w.get("norm_eps", 1e-6))
    if "rope" in data:
        r = dict(data["rope"])
        kind = r.pop("scaling", None)
        keys = {k: r.pop(k) for k in list(r) if k not in ("base", "style", "offset", "positions")}
        a["rope"] = dict(style="half", **r, **({"scaling": dict(type=kind, **keys)} if kind else {}))
    for key in ("softcap", "alibi"):
        if key in data:
            a[key] = data[key]
    return a, data.get("mask", "none")


@pytest.mark.parametrize("name", BUILTINS)
@pytest.mark.parametrize("preset", ["exact", "by-hand"])
def test_each_builtin_matches_numpy(name, preset):
    a, mask = arrays(name)
    trace = tracer.run(name, preset)
    ref = reference(a, mask, by_hand=preset == "by-hand")
    for sid, want in ref.items():
        np.testing.assert_allclose(trace.rows(sid), want, rtol=1e-12, atol=1e-12, err_msg=f"{name} {sid}")


def test_streaming_lesson():
    t = tracer.run("streaming")
    allowed = t.rows("h0.masked") > -math.inf
    assert allowed[:, 0].all() and (allowed.sum(axis=1) <= 3).all()
    assert allowed.sum(axis=1).tolist() == [1, 2, 3, 3, 3, 3]
    window = tracer.run("streaming", mask="sliding:2")
    assert (window.rows("h0.weights")[2:, 0] == 0).all() and (t.rows("h0.weights")[2:, 0] > 0).all()
