"""The per-stage kernels of kernels.py, compiled: numba.njit(cache=True) over each of them.

Importing this module imports numba (≈0.2 s) and the first call loads numba's machinery (≈0.15 s
more, then a few ms per kernel from the on-disk cache, or seconds to compile on a first run).
"""
from . import _numba_cache, kernels

_numba_cache.preload_blas()  # before numba: a third of a cached start-up
from numba import njit  # noqa: E402

_numba_cache.listen()  # compile notices for a front end (tracer.on_compile)

NAMES = ("project", "scores", "divide", "floor_divide", "mask", "row_max", "exp_powers", "base_powers",
         "row_sums", "softmax_weights", "relu_weights", "weighted_sum", "concat", "finite", "add",
         "layer_norm")

for _name in NAMES:
    globals()[_name] = njit(cache=True)(getattr(kernels, _name))
