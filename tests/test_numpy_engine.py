"""The NumPy engine (what a cold kernel cache runs on) against the plain-NumPy reference of
tests/reference.py and against the compiled engines, step by step; and the cache marker plumbing."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reference
import tracer
from tracer.kernels import warm

TOL = {"float64": 1e-9, "float32": 2e-4}


@pytest.fixture
def cold(monkeypatch):
    """Every auto trace as with a cold cache under a front end: on the NumPy engine."""
    monkeypatch.setattr(warm, "use_numpy", lambda: True)
    import sys
    if "numba" not in sys.modules:  # the engine choice skips tiny traces until numba is loaded
        tracer.run("by_hand", engine="stages")


def close(a, b, dtype) -> bool:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    with np.errstate(invalid="ignore"):  # −∞ − −∞ in masked steps: equal cells, caught by a == b
        diff = np.abs(a - b)
    scale = max(1.0, float(np.nanmax(np.abs(b))) if b.size else 1.0)
    return a.shape == b.shape and bool(np.all((diff <= TOL[dtype] * scale) | (a == b)))


def same_steps(numpy_trace, other, dtype) -> None:
    assert [s.id for s in numpy_trace.steps] == [s.id for s in other.steps]
    for s in other.steps:
        assert close(numpy_trace[s.id], other[s.id], dtype), s.id


@pytest.mark.parametrize("name", ["by_hand", "multi_head", "low_rank", "residual_norm", "gpt_causal", "toy_dk4"])
@pytest.mark.parametrize("preset", ["exact", "by-hand"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_builtins_match_the_stage_kernels(cold, name, preset, dtype):
    want = tracer.run(name, preset, engine="stages", dtype=dtype)
    got = tracer.run(name, preset, dtype=dtype)
    assert got.engine == "numpy" and want.engine == "stages"
    same_steps(got, want, dtype)


@pytest.mark.parametrize("layout", ["rows", "columns"])
@pytest.mark.parametrize("extra", [dict(), dict(normalize="relu"), dict(stable=False, softmax_base=3.0),
                                   dict(scale="none"), dict(scale="floor"), dict(mask="causal")])
def test_both_layouts_and_variants_match_the_reference(cold, layout, extra):
    sc = tracer.load_scenario("by_hand")
    got = tracer.run(sc, "exact", layout=layout, **extra)
    assert got.engine == "numpy"
    arith = dict(scale=extra.get("scale", "sqrt"), base=extra.get("softmax_base", "e"),
                 normalize=extra.get("normalize", "softmax"), stable=extra.get("stable", True))
    x, w = np.asarray(sc.x), lambda m: [np.asarray(a) for a in m]
    if layout == "columns":  # the reference takes the inputs as the layout writes them
        x, w = x.T, (lambda m: [np.asarray(a).T for a in m])
    want = reference.attention(x, w(sc.w_q), w(sc.w_k), w(sc.w_v), layout=layout,
                               mask=extra.get("mask", "none"), **arith)
    for sid, a in want.items():
        assert close(got[sid], a, "float64"), sid


def test_a_mask_matrix_and_a_fused_size_layer(cold):
    sc = tracer.load_scenario("gpt2_small")
    small = tracer.scenario.build({"mask": "causal", "random": dict(seed=3, tokens=40, d_model=24, heads=3, d_k=8,
                                                                    output=True)})
    for dtype in ("float32", "float64"):
        same_steps(tracer.run(small, dtype=dtype), tracer.run(small, engine="fused", dtype=dtype), dtype)
    m = (np.random.default_rng(1).random((40, 40)) < 0.6).astype(int)
    m[:, 0] = 1
    same_steps(tracer.run(small, mask=m.tolist()), tracer.run(small, engine="stages", mask=m.tolist()), "float64")
    assert sc.n == 1024  # the built-in that a cold first run is about


@settings(max_examples=25)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 9), heads=st.integers(1, 3), d_k=st.integers(1, 5),
       dtype=st.sampled_from(["float64", "float32"]), preset=st.sampled_from(["exact", "by-hand"]),
       mask=st.sampled_from(["none", "causal"]))
def test_random_layers_match_the_stage_kernels(seed, n, heads, d_k, dtype, preset, mask):
    from tracer.scenario import build
    sc = build({"mask": mask, "arithmetic": preset,
                "random": dict(seed=seed, tokens=n, d_model=4, heads=heads, d_k=d_k, output=heads > 1)})
    want = tracer.run(sc, engine="stages", dtype=dtype)
    old = warm.use_numpy
    warm.use_numpy = lambda: True
    try:
        got = tracer.run(sc, dtype=dtype)
    finally:
        warm.use_numpy = old
    assert got.engine == "numpy"
    same_steps(got, want, dtype)


def test_the_cache_folder_is_where_numba_puts_the_kernels():
    from tracer.kernels import fused
    assert os.path.realpath(warm.folder()) == os.path.realpath(fused.trace_heads._cache._cache_path)


def test_the_marker_decides_and_a_library_run_never_goes_cold(monkeypatch, tmp_path):
    monkeypatch.setitem(warm._state, "marker", str(tmp_path / "marker"))
    monkeypatch.setitem(warm._state, "warm", False)
    monkeypatch.setitem(warm._state, "enabled", False)
    assert not warm.use_numpy()          # a script or a test: numba compiles as before
    monkeypatch.setitem(warm._state, "enabled", True)
    monkeypatch.setitem(warm._state, "started", True)   # no background process from a test
    assert warm.use_numpy()
    (tmp_path / "marker").write_text("")
    assert not warm.use_numpy()


@pytest.mark.parametrize("spare_ok", [True, False])
def test_no_writable_folder_falls_back_once(monkeypatch, tmp_path, spare_ok):
    import sys

    from tracer.kernels import notices
    ro = tmp_path / "read-only"

    def candidates():  # numba's order: $NUMBA_CACHE_DIR first, then places that cannot be written
        custom = os.environ.get("NUMBA_CACHE_DIR")
        return ([os.path.join(custom, "k")] if custom else []) + [str(ro / "a"), str(ro / "b")]
    said = []
    monkeypatch.setattr(warm, "candidates", candidates)
    monkeypatch.setattr(warm, "_writable", lambda f: not f.startswith(str(ro)) and spare_ok)
    monkeypatch.setattr(warm.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(warm, "_state", {"enabled": True, "started": True})
    monkeypatch.setenv("NUMBA_CACHE_DIR", "")
    monkeypatch.setattr(sys.modules["numba"].config, "CACHE_DIR", sys.modules["numba"].config.CACHE_DIR)
    monkeypatch.setattr(notices, "hook", said.append)
    if spare_ok:
        assert warm.folder().startswith(str(tmp_path)) and os.environ["NUMBA_CACHE_DIR"].startswith(str(tmp_path))
    else:
        assert warm.folder() is None and warm.use_numpy()
    warm.folder()
    assert len(said) == 1 and "no writable folder" in said[0]


def test_the_warm_up_compiles_every_kernel_a_caller_runs_in_both_dtypes():
    """What the background compile leaves in the cache is what traces ask for: every kernel that
    Python code calls (the rest run inside these), float32 and float64. (On a warm cache this loads.)"""
    from numba.core.registry import CPUDispatcher

    from tracer.kernels import decode, fused, jit, online, warmup
    warmup.compile_all()
    called = [k._jit for name, k in jit.KERNELS.items() if name in
              ("project", "concat", "add", "add_row", "layer_norm", "rms_norm", "rotate", "textbook_head")]
    called += [d for m in (fused, online, decode) for name, d in vars(m).items()
               if isinstance(d, CPUDispatcher) and not name.startswith("_")]   # mxfp4: read with its checkpoint
    assert len(called) == 14
    for d in called:
        dtypes = {t for sig in (d.signatures if d else []) for t in ("float32", "float64") if f"array({t}" in str(sig).lower()}
        assert {"float32", "float64"} <= dtypes, (d, dtypes)


def test_waiting_for_the_warm_up_ends_with_it(monkeypatch, tmp_path):
    """wait() waits while a process holds the lock file, whatever its age, and not for a lock
    that nobody holds (a warming process that was killed leaves its file, not its hold)."""
    import threading
    monkeypatch.setattr(warm, "_state", {"folder": str(tmp_path), "marker": str(tmp_path / "marker")})
    assert not warm.wait()                                   # no lock file: nobody compiles
    open(warm.lock_path(), "w").close()
    assert not warm.wait()                                   # a file nobody holds
    held = open(warm.lock_path(), "a")
    warm.hold(held)
    os.utime(warm.lock_path(), (0, 0))                       # old, but held

    def finish():
        (tmp_path / "marker").write_text("")
        held.close()
    done = threading.Timer(0.3, finish)
    done.start()
    assert warm.wait()                                       # waited for the holder's marker
    done.join()


def test_two_processes_saving_one_kernel_keep_both_entries(monkeypatch, tmp_path):
    """Two saves of one function's cache at once (here two threads, each with its own file as two
    processes have): the index keeps both entries, each with its own data."""
    import threading
    import time

    from numba.core.caching import IndexDataCacheFile

    from tracer.kernels import cache
    cache.listen()                                   # what importing a kernel does: saves are locked
    load = IndexDataCacheFile._load_index

    def slow_load(self):                             # widens the read-modify-write window
        got = load(self)
        time.sleep(0.2)
        return got
    monkeypatch.setattr(IndexDataCacheFile, "_load_index", slow_load)
    files = [IndexDataCacheFile(str(tmp_path), "kernel-1.py311", ("stamp", 1)) for _ in range(2)]
    saves = [threading.Thread(target=f.save, args=(key, key * 3)) for f, key in zip(files, ("f64", "f32"))]
    for t in saves:
        t.start()
    for t in saves:
        t.join()
    assert {key: files[0].load(key) for key in ("f64", "f32")} == {"f64": "f64" * 3, "f32": "f32" * 3}


def test_a_killed_warm_up_is_started_again(monkeypatch, tmp_path):
    """The lock file of a process that ended without removing it (killed) is taken over once it
    is older than a start-up; a held one, or a fresh one, is left alone."""
    monkeypatch.setattr(warm, "_state", {"folder": str(tmp_path)})
    open(warm.lock_path(), "w").close()
    assert not warm._claim()                                  # fresh: its process may be starting
    os.utime(warm.lock_path(), (0, 0))
    with open(warm.lock_path(), "a") as held:
        warm.hold(held)
        assert not warm._claim()                              # old, but its process lives
    assert warm._claim() and os.path.exists(warm.lock_path())  # old and let go: taken over

