"""A checkpoint's tensors as attnsim reads them (tracer/models/weights.py): every dtype NumPy holds,
whole and by rows, equal to safetensors' own reading, wherever a tensor sits
in the file; every bfloat16 widened as torch widens it; a non-finite value named with its
place either way."""
import warnings

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



# ---------------------------------------------------------------- bfloat16
def test_every_bfloat16_is_widened_as_torch_widens_it():
    """Every bit pattern (zeros, subnormals, ±inf, quiet and signalling NaNs) against torch's own
    widening, whole and into a given buffer; no NumPy warning on the way (a NaN is named after)."""
    torch = pytest.importorskip("torch")
    from tracer.models.weights import _widen_bf16
    words = np.arange(1 << 16, dtype=np.uint16)
    want = torch.from_numpy(words.view(np.int16)).view(torch.bfloat16).to(torch.float64).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, finite = _widen_bf16(words.reshape(256, 256))
    assert got.shape == (256, 256) and not finite
    got = got.reshape(-1)
    np.testing.assert_array_equal(got, want)   # NaN where torch has NaN
    seen = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[seen]), np.signbit(want[seen]))   # −0 stays −0
    ok = np.isfinite(want)
    into = np.full(int(ok.sum()), np.nan)
    got, finite = _widen_bf16(words[ok], into)
    assert finite and got is into and np.array_equal(into, want[ok])


@pytest.mark.parametrize("rows", [None, [2, 0]])
def test_a_bfloat16_value_that_is_not_finite_is_named(tmp_path, rows):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file
    w = torch.ones((3, 5), dtype=torch.bfloat16)
    w[2, 4] = float("nan")
    save_file({"w": w}, str(tmp_path / "model.safetensors"))
    with pytest.raises(ScenarioError, match=r"w: holds nan at \[2, 4\]; expected finite weights"):
        Tensors(tmp_path).rows("w", rows)
    w[2, 4] = -0.5
    save_file({"w": w}, str(tmp_path / "model.safetensors"))
    np.testing.assert_array_equal(Tensors(tmp_path).rows("w", rows), w.double().numpy()[rows or slice(None)])
