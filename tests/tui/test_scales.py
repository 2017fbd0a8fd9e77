"""A matrix's colour scale is measured once while the matrix lives (tui/widgets/scales.py)."""
import gc

import numpy as np

from tui.widgets import scales
from tui.widgets.heat import Scale


def test_the_same_cells_reuse_their_scale_and_a_change_of_writing_does_not():
    a = np.arange(12.0).reshape(3, 4) / 7
    first = scales.scale_of(a, True, 1e-15)
    assert scales.scale_of(a, True, 1e-15) is first
    assert scales.scale_of(a.T, True, 1e-15) is scales.scale_of(a.T, True, 1e-15)   # a new view each time
    assert scales.scale_of(a.T, True, 1e-15) is not first                            # other cells in order
    assert scales.scale_of(a, False, 1e-15) is not first
    assert scales.scale_of(a[1:], True, 1e-15) is not first
    expected = Scale(a, True, 1e-15)   # what a fresh measurement says
    assert (first.lo, first.hi, first.width, first.text(a[2, 3])) == (expected.lo, expected.hi, expected.width,
                                                                       expected.text(a[2, 3]))


def test_a_matrix_that_dies_is_forgotten_and_new_cells_at_its_address_are_measured_anew():
    a = np.ones((4, 4))
    scales.scale_of(a, True, 1e-15)
    key = scales._key(a, True, 1e-15)
    assert key in scales._scales
    del a
    gc.collect()
    assert key not in scales._scales
    b = np.full((4, 4), 3.0)
    assert scales.scale_of(b, True, 1e-15).hi == 3.0


def test_measured_ahead_on_the_background_thread():
    a, b = np.random.default_rng(0).random((50, 40)), np.random.default_rng(1).random((30, 20))
    scales.measure_ahead([a, b], False, 1e-15)
    scales._ahead.submit(lambda: None).result()   # the thread has done what was asked before
    assert scales._key(a, False, 1e-15) in scales._scales and scales._key(b, False, 1e-15) in scales._scales
