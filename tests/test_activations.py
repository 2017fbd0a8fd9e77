"""The earlier blocks' MLP activations (tracer/models/ops.py) against transformers' own functions in
float64, on generated arrays and at the edges (±∞, NaN, 0, huge values): every config name attnsim
reads is computed as the model computes it."""
import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra.numpy import arrays

from tracer.models.families import ACTIVATIONS
from tracer.models.ops import activate

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def reference(name: str):
    """transformers' function for a config's activation name, or BLOOM's own."""
    if name == "gelu_bloom":
        from transformers.models.bloom.modeling_bloom import bloom_gelu_forward
        return bloom_gelu_forward
    from transformers.activations import ACT2FN
    return ACT2FN[name]


NAMES = sorted(ACTIVATIONS)
EDGES = np.array([0.0, -0.0, 1e-300, -1e-300, 1.0, -1.0, 3.0, -3.0, 20.0, -20.0, 1e150, -1e150, 1e300, -1e300,
                  np.inf, -np.inf, np.nan])


def check(name: str, u: np.ndarray) -> None:
    with np.errstate(all="ignore"):
        got = activate(u.copy(), ACTIVATIONS[name])
    want = reference(name)(torch.from_numpy(u.copy())).numpy()
    # a few roundings apart (NumPy's tanh and erf are not PyTorch's), and the same infinities and NaNs
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15, equal_nan=True, err_msg=name)


@pytest.mark.parametrize("name", NAMES)
def test_each_activation_at_the_edges(name):
    check(name, EDGES)


@pytest.mark.parametrize("name", NAMES)
@given(u=arrays(np.float64, st.tuples(st.integers(1, 40), st.integers(1, 40)),
                elements=st.floats(-50, 50, allow_nan=False)))
def test_each_activation_on_generated_arrays(name, u):
    check(name, u)


def test_the_input_is_left_as_it_was():
    u = np.linspace(-5, 5, 101)
    before = u.copy()
    for name in set(ACTIVATIONS.values()):
        activate(u, name)
    np.testing.assert_array_equal(u, before)
