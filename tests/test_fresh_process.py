"""Every mechanism, first thing in a fresh process with an empty kernel cache: what a user's first
`attnsim` run meets. Tiny layers then compute with the kernels' NumPy twins and larger ones on the
NumPy engine (tracer/numpy_engine.py), so a kernel missing there is a crash that an earlier test,
having loaded numba, would hide. One subprocess runs them all."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

import tracer
from tracer.scenario.files import builtin_extras

SKIP = {"gpt3_layer"}   # 2.5 GB of generated weights: its size, not its mechanism, is what it shows

SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    from tracer.kernels import warm
    warm._state["started"] = True   # a front end on a cold cache, without the background compile
    warm.enable()
    import tracer
    compiled = []
    tracer.on_compile(compiled.append)

    def every_step(trace):
        for s in trace.steps:
            trace[s.id]
        trace.explain(trace.steps[-1].id, 0, 0)
        return trace

    rng = np.random.default_rng(0)
    out = {}
    for n in (4, 80):   # a tiny layer (the kernels' NumPy twins) and one on the NumPy engine
        x, w = rng.normal(size=(n, 6)), [rng.normal(size=(6, 3)) for _ in range(2)]
        only_bo = tracer.from_arrays(x, q=w, k=w, v=w, o=rng.normal(size=(6, 5)), bo=rng.normal(size=5))
        trace = every_step(tracer.run(only_bo))
        out[f"only_bo_{n}"] = [trace.engine, trace["out"].tolist()]
    q, bias = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 3))
    bias[0, 1, 2] = -np.inf   # an additive mask (SDPA's float mask), and tensors' shapes
    out["sdpa"] = every_step(tracer.sdpa(q, q, q, bias).trace()).scenario.heads, tracer.sdpa(q, q, q, bias).output.tolist()
    for name in json.loads(sys.argv[1]):
        for preset in ("exact", "by-hand"):
            every_step(tracer.run(name, preset))
        out[name] = tracer.run(name).engine
    out["compiled"] = compiled
    print(json.dumps(out))
""")


def test_every_builtin_and_an_output_bias_alone_run_first_in_a_fresh_process(tmp_path):
    names = [n for n in tracer.builtin_names() if n not in SKIP and not builtin_extras(n)]
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(names)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout)
    assert set(names) <= set(got)
    assert got["only_bo_80"][0] == "numpy"   # the engine a cold cache runs larger layers on
    assert got["compiled"] == []   # nothing waits for the compiler (a large W_O once sent GPT-2 small to it: 30 s)
    rng = np.random.default_rng(0)
    for n in (4, 80):   # the same numbers as the script drew, through plain NumPy
        x, w = rng.normal(size=(n, 6)), [rng.normal(size=(6, 3)) for _ in range(2)]
        w_o, b_o = rng.normal(size=(6, 5)), rng.normal(size=5)
        z = []
        for h in range(2):
            q = k = v = x @ w[h]
            s = q @ k.T / np.sqrt(3)
            a = np.exp(s - s.max(axis=1, keepdims=True))
            z.append(a / a.sum(axis=1, keepdims=True) @ v)
        np.testing.assert_allclose(got[f"only_bo_{n}"][1], np.hstack(z) @ w_o + b_o, rtol=1e-12, atol=1e-12)
    q, bias = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 3))
    bias[0, 1, 2] = -np.inf
    s = q @ q.transpose(0, 2, 1) / 2 + bias
    a = np.exp(s - s.max(axis=-1, keepdims=True))
    assert got["sdpa"][0] == 2
    np.testing.assert_allclose(got["sdpa"][1], a / a.sum(axis=-1, keepdims=True) @ q, rtol=1e-12, atol=1e-12)


WARM = textwrap.dedent("""
    import json, sys
    import tracer
    from tracer.kernels import matmul   # numba loaded: tiny layers take the compiled kernels too
    compiled = []
    tracer.on_compile(compiled.append)
    for name in json.loads(sys.argv[1]):
        for preset in ("exact", "by-hand"):
            for dtype in ("float64", "float32"):
                trace = tracer.run(name, preset, dtype=dtype)
                for s in trace.steps:
                    trace[s.id]
    print(json.dumps(compiled))
""")


def test_after_the_background_compile_no_builtin_waits_for_the_compiler():
    """Once the background compile has left its marker, a process with numba loaded (a TUI that
    showed GPT-2 small) opens every built-in, both presets and dtypes, without compiling a kernel:
    the linear layers' kernels were missing from it (15 s at the first linear layer)."""
    from tracer.kernels import warm
    warm.compile_in_background()   # the suite's start did it already under xdist; alone, now
    assert warm.wait()
    names = [n for n in tracer.builtin_names() if n not in SKIP and not builtin_extras(n)]
    done = subprocess.run([sys.executable, "-c", WARM, json.dumps(names)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == []
