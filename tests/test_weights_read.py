"""A checkpoint's tensors as attnsim reads them (tracer/models/weights.py): every dtype NumPy holds,
whole and by rows, equal to safetensors' own reading, wherever a tensor sits
in the file; a non-finite value named with its place either way."""
import numpy as np
import pytest

from tracer.errors import ScenarioError
from tracer.models.weights import Tensors

safetensors_numpy = pytest.importorskip("safetensors.numpy")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    rng = np.random.default_rng(3)
    tensors = {"a.odd": rng.normal(size=(3,)).astype(np.float16),   # 6 bytes: what follows starts unaligned
               "b.half": rng.normal(size=(5, 7)).astype(np.float16),
               "c.single": rng.normal(size=(4, 9)).astype(np.float32),
               "d.double": rng.normal(size=(6, 2)),
               "e.scalar": np.array(2.5, dtype=np.float32)}
    path = tmp_path_factory.mktemp("weights")
    safetensors_numpy.save_file(tensors, path / "model.safetensors")
    return path, tensors


@pytest.mark.parametrize("name", ["a.odd", "b.half", "c.single", "d.double", "e.scalar"])
def test_whole_tensors_and_rows_are_read_as_saved(folder, name):
    path, saved = folder
    t = Tensors(path)
    got = t[name]
    assert got.dtype == np.float64 and got.shape == saved[name].shape
    np.testing.assert_array_equal(got, saved[name].astype(np.float64))
    if saved[name].ndim:
        np.testing.assert_array_equal(t.rows(name, [2, 0]), saved[name][[2, 0]].astype(np.float64))
    with t.reusing():   # into a kept buffer, twice
        for _ in range(2):
            np.testing.assert_array_equal(t[name], saved[name].astype(np.float64))


@pytest.mark.parametrize("rows", [None, [0, 3]])
def test_a_value_that_is_not_finite_is_named_whole_or_by_rows(tmp_path, rows):
    bad = np.ones((4, 3), np.float32)
    bad[3, 1] = np.inf
    safetensors_numpy.save_file({"w": bad}, tmp_path / "model.safetensors")
    with pytest.raises(ScenarioError, match=r"w: holds inf at \[3, 1\]; expected finite weights"):
        Tensors(tmp_path).rows("w", rows)
