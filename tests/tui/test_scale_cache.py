"""The colour scale a matrix view draws with is measured once per array and kept: the same array
(or the same view of it) gets the same scale; another array, another view or another printing never
gets a scale kept for something else."""
from __future__ import annotations

import numpy as np

from tui.widgets.heat import scale_for


def test_the_same_array_is_measured_once():
    a = np.arange(12.0).reshape(3, 4) / 7
    assert scale_for(a, True, 1e-15) is scale_for(a, True, 1e-15)
    assert scale_for(a, False, 1e-15) is not scale_for(a, True, 1e-15)
    assert scale_for(a.T, True, 1e-15) is scale_for(a.T, True, 1e-15)   # the columns layout: a new view each time


def test_views_of_one_buffer_keep_their_own_scales():
    w = np.stack([np.full((2, 3), 1.0), np.full((2, 3), -123.456)])   # two heads' weights in one array
    first, second = scale_for(w[0], False), scale_for(w[1], False)
    assert first is not second
    assert (first.lo, first.hi) == (1.0, 1.0) and (second.lo, second.hi) == (-123.456, -123.456)
    assert scale_for(w[1].T, False) is not second and scale_for(w[1].T, False).lo == -123.456


def test_a_new_array_at_a_reused_address_is_measured_again():
    for value in (1.0, 2.0, 3.0):
        a = np.full((2, 2), value)   # the previous array is gone: its address may come back
        assert scale_for(a, False).hi == value
        del a
