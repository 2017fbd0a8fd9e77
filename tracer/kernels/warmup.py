"""The background compile of a first run: `python -m tracer.kernels.warmup` compiles every kernel a
trace can ask for, then leaves the marker that says the cache is warm (see warm.py)."""
from __future__ import annotations

import os
import subprocess
import sys

from . import warm


DTYPES = ("float64", "float32")


def compile_all(dtypes=DTYPES) -> None:
    """Runs every kernel once per dtype and variant, on a tiny layer, so that numba compiles and
    caches each specialisation a trace or tracer.attention can ask for."""
    import numpy as np

    import tracer
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(6, 4)), [rng.normal(size=(4, 2)) for _ in range(2)]
    common = dict(x=x, q=w, k=w, layout="rows", name="warm")
    layers = [tracer.from_arrays(v=w, o=rng.normal(size=(4, 4)), bo=rng.normal(size=4), mask="causal",
                                 residual={"norm": "layer"}, **common),
              tracer.from_arrays(v_down=[m[:, :1] for m in w], v_up=[np.ones((1, 2))] * 2, **common),
              # today's mechanisms: QK-norm, rotary positions, soft-capping, ALiBi, the output's norm
              tracer.from_arrays(v=w, o=rng.normal(size=(4, 4)), mask="causal", q_norm=[1.0, 1.0], k_norm=[1.0, 1.0],
                                 rope={"base": 10.0}, softcap=2.0, alibi=True, out_norm={}, **common)]
    sets = [dict(), dict(scale="floor", softmax_base=3.0, stable=False), dict(normalize="relu", scale="none"),
            dict(mask=np.tril(np.ones((6, 6), int)).tolist())]
    decoding = tracer.from_arrays(v=w, decode=3, **common)   # a KV cache's token-by-token kernel
    for dtype in dtypes:
        for sc in layers:
            for extra in sets:
                for engine in ("stages", "fused"):
                    tracer.run(sc, "exact", engine=engine, dtype=dtype, **extra)
                tracer.attention(sc, "exact", engine="fused", dtype=dtype, **extra)
        for sc in layers[:2]:   # the online algorithm (keys in blocks), causal and explicit masks
            for mask in ("causal", np.tril(np.ones((6, 6), int)).tolist()):
                tracer.run(sc, "exact", engine="fused", dtype=dtype, algorithm="online", mask=mask)
        tracer.run(decoding, "exact", engine="fused", dtype=dtype)
        _linear(dtype)
        if dtype == "float64":   # a large lightning indexer's scores and choice (float64 whatever the run's)
            from .indexer import index_topk
            index_topk(np.ones((6, 2, 2)), np.ones((6, 2)), np.ones((6, 2)), np.arange(1, 7), 2, 0.5)


def _linear(dtype: str) -> None:
    """The linear layers' kernels (issue 33): the recurrence through the built-in lessons, and the
    hybrid checkpoints' short convolutions and gated norms with the arguments their callers pass."""
    import numpy as np

    import tracer
    from . import linear
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(4, 3)), rng.normal(size=(3, 2))
    for sc in (tracer.load_scenario("delta_rule"), tracer.load_scenario("linear_decay"),
               tracer.from_arrays(x, w, w, w, linear=dict(rule="delta", beta=0.5, l2=True))):   # q, k to unit length
        tracer.run(sc, "exact", engine="fused", dtype=dtype)
    a = np.ones((2, 3, 4), dtype)
    linear.conv(a, np.ones((2, 2, 4)), linear.ACTS["silu"], np.empty_like(a))
    for mean, act in ((False, linear.ACTS[None]), (True, linear.ACTS["silu"])):
        linear.norm_rows(a, np.ones(4), 1e-6, mean, a, act, np.empty_like(a))


def main(argv: list[str]) -> int:
    """With two cores or more, float32's kernels compile in a second process beside float64's;
    `--dtype D` is that second process (it leaves the lock and the marker to the first)."""
    if warm.folder() is None:
        return 1
    if argv[:1] == ["--dtype"]:
        compile_all(argv[1:2])
        return 0
    try:
        os.makedirs(warm.folder(), exist_ok=True)   # run by hand on a fresh checkout: no __pycache__ yet
        lock = open(warm.lock_path(), "a")   # held until this process ends (warm.wait asks)
        warm.hold(lock)
        helper = None
        if (os.cpu_count() or 1) > 1:
            helper = subprocess.Popen([sys.executable, "-m", __spec__.name, "--dtype", DTYPES[1]],
                                      stdin=subprocess.DEVNULL)
        compile_all(DTYPES[:1] if helper else DTYPES)
        if helper is None or helper.wait() == 0:
            with open(warm.marker(), "w") as f:
                f.write("attnsim's kernels are compiled in this folder\n")
    finally:
        try:
            os.remove(warm.lock_path())
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
