"""The RMS norm in NumPy, the one copy beside its kernel (kernels/stages.rms_norm): each row divided
by its root mean square, times a gain. QK-norm, the output's norm, latent attention's latents and
the earlier blocks of a checkpoint all take it from here."""
from __future__ import annotations

import numpy as np

from .errors import ScenarioError


def rms_rows(a: np.ndarray, gain, eps: float) -> np.ndarray:
    """Each row (last axis) divided by its root mean square, times the gain: kernels.rms_norm on a
    stack at once (float64 sums; a row divided by its largest value first, as there)."""
    peak = np.abs(a).max(axis=-1, keepdims=True).astype(np.float64)
    big = np.maximum(peak, 1.0) if eps > 0 else np.where(peak > 0, peak, 1.0)
    y = a.astype(np.float64) / big
    with np.errstate(divide="ignore", invalid="ignore"):   # a row of zeros with eps = 0: NaN, refused before
        inv = 1.0 / np.sqrt((y * y).mean(axis=-1, keepdims=True) + eps / big / big)
        return (y * inv * gain).astype(a.dtype, copy=False)


def refuse_zero_rows(a: np.ndarray, eps: float, field: str, what, source: str | None) -> None:
    """With eps = 0, a row of zeros has no root mean square to divide by (0 ÷ 0; PyTorch gives NaN):
    refused in one line naming the eps, the row and the scenario's file. `what(*place)` words the
    row at `place` (its index in `a` without the last axis: (token,) or (head, token))."""
    if eps > 0:
        return
    zero = ~np.asarray(a).any(axis=-1)
    if zero.any():
        place = [int(i) for i in np.argwhere(zero)[0]]
        raise ScenarioError(field, f"is 0, and {what(*place)} is all zeros: its root mean square is 0, and 0 ÷ 0 "
                            f"has no value (PyTorch gives NaN); expected {field} > 0 (models use 1e-6) or no row of zeros",
                            source)


def mean_square(row: np.ndarray) -> float:
    """A row's mean square in float64, as an explanation writes it under the root."""
    row = np.asarray(row, dtype=np.float64)
    return float((row * row).mean())
