"""A whole trace on one engine, for tests that compare them: the plain Python kernels, the
compiled ones, their NumPy twins, or the fused kernels."""
import tracer
from tracer import kernels
from tracer.numpy_engine import KERNELS as NUMPY_KERNELS


def run_in(engine: str, scenario, **keys) -> tracer.Trace:
    """A whole trace on one engine: py (plain kernels), jit, numpy or fused."""
    trace = tracer.run(scenario, lazy=True, engine="fused" if engine == "fused" else "stages", **keys)
    if engine != "fused":
        trace.kernels = {"py": kernels.stage_kernels(compiled=False), "jit": kernels.stage_kernels(compiled=True),
                         "numpy": NUMPY_KERNELS}[engine]
    return trace.compute_all()
