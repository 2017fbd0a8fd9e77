"""Keys and values shared across layers (Gemma 3n, Gemma 4; CONTRACT §17; mechanisms/kv_sharing):
`[shared_kv]` with `source`, `readers` and `x` (what the source layer's attention read, the step
kv_x, from which the keys and values are projected). Against NumPy written here: the stage, fused
and online paths, both layouts; the titles and the exports name the source; the cache note counts
it once; the keys and refusals through the CLI."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import tracer
from tracer.step_notes import notes
from tui.cli import main

RNG = np.random.default_rng(13)
X, KV_X = RNG.normal(size=(5, 4)), RNG.normal(size=(5, 4))
W_Q = [RNG.normal(size=(4, 2)) for _ in range(2)]
W_K, W_V = [RNG.normal(size=(4, 2))], [RNG.normal(size=(4, 3))]


def scenario(layout: str = "rows") -> tracer.Scenario:
    t = (lambda m: np.asarray(m).T) if layout == "columns" else np.asarray
    return tracer.from_arrays(t(X), [t(w) for w in W_Q], [t(w) for w in W_K], [t(w) for w in W_V], layout=layout,
                              mask="causal", shared_kv=dict(source="layer 13", x=t(KV_X)))


def reference() -> dict:
    k, v = KV_X @ W_K[0], KV_X @ W_V[0]
    out = {"kv_x": KV_X, "kv0.k": k, "kv0.v": v}
    for h, w in enumerate(W_Q):
        s = (X @ w) @ k.T / math.sqrt(2)
        s = np.where(np.tril(np.ones_like(s)) > 0, s, -np.inf)
        e = np.exp(s - s.max(axis=1, keepdims=True))
        out[f"h{h}.weights"] = e / e.sum(axis=1, keepdims=True)
        out[f"h{h}.z"] = out[f"h{h}.weights"] @ v
    return out


@pytest.mark.parametrize("layout", ["rows", "columns"])
@pytest.mark.parametrize("engine, algorithm", [("stages", "standard"), ("fused", "standard"), ("stages", "online")])
def test_keys_and_values_from_the_source_layers_input(layout, engine, algorithm):
    trace = tracer.run(scenario(layout), engine=engine, algorithm=algorithm, block=2)
    for sid, want in reference().items():
        if algorithm == "online" and sid.endswith(".weights"):
            continue
        np.testing.assert_allclose(trace.rows(sid), want, rtol=1e-12, atol=1e-14, err_msg=sid)
    assert trace.step("kv0.k").inputs == ("kv_x",) and trace.step("h0.q").inputs == ("x",)
    assert [s.id for s in trace.steps][:2] == ["x", "kv_x"]


def test_titles_explanations_and_the_export_name_the_source(tmp_path):
    trace = tracer.run(scenario())
    assert trace.step("kv0.k").title == "Keys of layer 13, shared: this layer computes none (group 0)"
    assert trace.step("kv0.k").formula == "K = X_kv·W_K"
    assert trace.explain("kv0.k", 1, 0).startswith("kv0.k[t2, 0] = kv_x(t2)·W_K[:, 0] = ")
    assert trace.explain("kv_x", 1, 0).endswith("(what layer 13's attention read: token t2, feature 0)")
    assert main(["export", "kv_sharing", "-o", str(tmp_path / "s.json")]) == 0
    doc = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    titles = {s["id"]: s["title"] for s in doc["steps"]}
    assert titles["kv0.v"] == "Values of layer A, shared (group 0)" and titles["h1.q"] == "Queries (head 1)"
    assert doc["scenario"]["kv_sharing"] == {"source": "layer A", "readers": [1], "x": False}


def test_a_layer_that_reads_them_all_keeps_no_cache():
    trace = tracer.run(scenario())
    width = 2 + 3   # d_k + d_v
    assert notes(trace, trace.step("h1.z")) == [
        f"This layer reads layer 13's keys and values (kv0.k, kv0.v): it computes none and keeps no KV cache; without "
        f"sharing it would keep 1 key/value head × 5 tokens × (d_k + d_v = {width}) = {5 * width} numbers."]


@pytest.mark.parametrize("section, message", [
    ("[shared_kv]\nreaders = [1]\n", 'shared_kv.source: missing; expected the source layer in words ("layer 13")'),
    ('[shared_kv]\nsource = "A"\nx = [[1, 0]]\n', "shared_kv.x: expected a 2 × 2 matrix (the source layer's input for "
                                                    "the same tokens), got 1 × 2"),
    ('[shared_kv]\nsource = "A"\nreaders = [3]\n', "shared_kv.readers: expected a list of different heads from 0 to 1"),
    ('[shared_kv]\nsource = "A"\nlayer = 3\n', "shared_kv.layer"),
    ("shared_kv = 3\n", "shared_kv: expected a table with source"),
    ('context = [[1, 0], [0, 1]]\n[shared_kv]\nsource = "A"\n', "shared_kv: expected self-attention without [mla]"),
    ('mask = "causal"\n[decode]\nprompt = 1\n[shared_kv]\nsource = "A"\n', "shared_kv: expected no [decode] section"),
])
def test_bad_sections_are_one_line_and_exit_2(tmp_path, capsys, section, message):
    path = tmp_path / "bad.toml"
    lines = section.splitlines(keepends=True)   # top-level keys, then the sections
    cut = next((i for i, line in enumerate(lines) if line.startswith("[")), len(lines))
    path.write_text(f"x = [[1, 0], [0, 1]]\n{''.join(lines[:cut])}[weights]\nq = [[[1, 0], [0, 1]], [[0, 1], [1, 0]]]\n"
                    f"k = [[1, 0], [0, 1]]\nv = [[1, 0], [0, 1]]\n{''.join(lines[cut:])}", encoding="utf-8")
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("attnsim: error: ") and message in err, err
