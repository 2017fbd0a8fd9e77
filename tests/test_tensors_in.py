"""from_arrays takes a course's arrays as they are: PyTorch tensors (float32 with grad, bfloat16,
bool masks, a list of one per head), and anything with __array__ or __dlpack__; the numbers are
the tensors' own."""
from __future__ import annotations

import numpy as np
import pytest

import tracer

torch = pytest.importorskip("torch")


def _layer(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(5, 4))
    w = {k: [rng.normal(size=(4, 2)) for _ in range(2)] for k in "qkv"}
    return x, w, rng.normal(size=(4, 3)), rng.normal(size=3)


def _reference(x, w, w_o, b_o, allowed):
    z = []
    for h in range(2):
        q, k, v = x @ w["q"][h], x @ w["k"][h], x @ w["v"][h]
        s = np.where(allowed, q @ k.T / np.sqrt(2), -np.inf)
        a = np.exp(s - s.max(axis=1, keepdims=True))
        z.append(a / a.sum(axis=1, keepdims=True) @ v)
    return np.hstack(z) @ w_o + b_o


def test_tensors_anywhere_from_arrays_takes_arrays():
    x, w, w_o, b_o = _layer()
    allowed = np.tril(np.ones((5, 5), bool))
    t = lambda a: torch.tensor(a, dtype=torch.float64, requires_grad=True)  # noqa: E731
    sc = tracer.from_arrays(t(x), q=[t(m) for m in w["q"]], k=torch.tensor(np.stack(w["k"])),
                            v=[t(m) for m in w["v"]], o=t(w_o), bo=t(b_o), mask=torch.from_numpy(allowed),
                            rope=None)
    np.testing.assert_allclose(tracer.run(sc)["out"], _reference(x, w, w_o, b_o, allowed), rtol=1e-12)


def test_float32_and_bfloat16_tensors_keep_their_values():
    x, w, w_o, b_o = _layer(1)
    x32 = torch.tensor(x, dtype=torch.float32)
    xb = torch.tensor(x, dtype=torch.bfloat16)
    for given, want in ((x32, x32.double().numpy()), (xb, xb.double().numpy())):
        sc = tracer.from_arrays(given, q=w["q"], k=w["k"], v=w["v"])
        np.testing.assert_array_equal(sc.x, want)


class OnlyArray:
    """A foreign array that NumPy reads through __array__ only."""
    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.a, dtype=dtype)


class OnlyDlpack:
    """A foreign array that NumPy reads through DLPack only."""
    def __init__(self, a):
        self.a = np.ascontiguousarray(a)

    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


@pytest.mark.parametrize("wrap", [OnlyArray, OnlyDlpack])
def test_array_protocols(wrap):
    x, w, _, _ = _layer(2)
    sc = tracer.from_arrays(wrap(x), q=[wrap(m) for m in w["q"]], k=[wrap(m) for m in w["k"]], v=wrap(np.stack(w["v"])))
    np.testing.assert_array_equal(sc.x, x)
    np.testing.assert_array_equal(sc.w_v, np.stack(w["v"]))


def test_a_complex_tensor_is_refused_in_one_line_naming_the_field():
    x, w, _, _ = _layer(3)
    with pytest.raises(tracer.ScenarioError, match=r"^weights\.q\[0\]: .*complex"):
        tracer.from_arrays(x, q=[torch.zeros(4, 2, dtype=torch.complex64)], k=w["k"][:1], v=w["v"][:1])
