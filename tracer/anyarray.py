"""Arrays as a course's code holds them: NumPy arrays, PyTorch tensors (CPU, any float dtype, with
or without grad), or anything else with `__dlpack__` or `__array__` (JAX, CuPy on the host, …),
made NumPy arrays without a copy where possible. PyTorch is never imported here: a tensor brings
its own methods."""
from __future__ import annotations

import numbers

import numpy as np

from .errors import ScenarioError


def is_array(value) -> bool:
    """Something to turn into a NumPy array (not a list, a number, a NumPy scalar or a string)."""
    if isinstance(value, (np.generic, numbers.Number, str, bytes)):
        return False
    return isinstance(value, np.ndarray) or _is_tensor(value) or hasattr(value, "__dlpack__") \
        or hasattr(value, "__array__")


def _is_tensor(value) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "detach")


def as_numpy(value, field: str = "array") -> np.ndarray:
    """One array-like as a NumPy array; bfloat16 (which NumPy lacks) becomes float32, exactly."""
    if isinstance(value, np.ndarray):
        return value
    try:
        if _is_tensor(value):
            t = value.detach()
            if t.device.type != "cpu":
                raise ScenarioError(field, f"is a tensor on {t.device}; expected a CPU tensor (.cpu())")
            if t.is_complex():
                raise ScenarioError(field, f"expected real numbers, got a tensor of {t.dtype}")
            return (t.float() if str(t.dtype) == "torch.bfloat16" else t).numpy()
        if hasattr(value, "__dlpack__"):
            try:
                return np.from_dlpack(value)
            except (TypeError, RuntimeError, BufferError):
                if not hasattr(value, "__array__"):
                    raise
        return np.asarray(value)
    except ScenarioError:
        raise
    except Exception as err:   # a foreign array's own error, whatever its type: one line naming the field
        raise ScenarioError(field, f"cannot be read as an array ({type(err).__name__}: {str(err)[:80]}); "
                            "expected a NumPy array, a CPU tensor or nested lists of numbers") from None


def numpy_tree(value, field: str = "array"):
    """`value` with every array-like inside it (in lists, tuples and dicts too) made NumPy."""
    if is_array(value) and not isinstance(value, np.ndarray):
        return as_numpy(value, field)
    if isinstance(value, (list, tuple)):
        return type(value)(numpy_tree(v, f"{field}[{n}]") for n, v in enumerate(value))
    if isinstance(value, dict):
        return {k: numpy_tree(v, f"{field}.{k}") for k, v in value.items()}
    return value
