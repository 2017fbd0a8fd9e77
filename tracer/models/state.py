"""A transformers model already in memory as a checkpoint: its config as config.json would hold
it, its state dict as the tensors a folder would hold, its tokenizer as tokenizer.json. The same
loader reads them (tracer.models.layer): same checks, same refusals; nothing is written to disk.

    scenario = tracer.from_transformers(model, tokenizer, "The cat sat on the mat", layer=5)

torch is imported here only, and only when a model is handed over.
"""
from __future__ import annotations

import contextlib
import math
import re

import numpy as np

from .. import memory
from ..checks import kind
from ..errors import ScenarioError
from .weights import ITEMSIZE, _finite

WHERE = "the model in memory"
TORCH_DTYPES = {"float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16", "uint8": "U8",
                "int8": "I8", "int16": "I16", "int32": "I32", "int64": "I64", "bool": "BOOL"}


class StateTensors:
    """The tensors of a model's state dict by name, read as `Tensors` reads a folder's: `t[name]`
    (float64), `t.rows(name, ids)`, `name in t`, shapes and dtypes in safetensors' words. Each
    tensor is converted to NumPy once, when read (an embedding matrix only for the text's rows)."""

    def __init__(self, state: dict):
        self._state, self.folder = state, WHERE
        self._pool: dict | None = None      # float64 buffers reused block after block (reusing())

    def __contains__(self, name: str) -> bool:
        return name in self._state

    @property
    def names(self) -> list[str]:
        return list(self._state)

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._get(name).shape)

    def dtype(self, name: str) -> str:
        text = str(self._get(name).dtype).removeprefix("torch.")
        return TORCH_DTYPES.get(text, text)

    def where(self, name: str) -> str:
        self._get(name)
        return WHERE

    def __getitem__(self, name: str) -> np.ndarray:
        return self.rows(name, None)

    @contextlib.contextmanager
    def reusing(self):
        """As `Tensors.reusing`: whole tensors read meanwhile are converted into buffers kept by
        their place in a block, so that the earlier blocks fill the same memory one after the
        other rather than fresh pages (the first touch of a page costs more than the conversion)."""
        self._pool = {}
        try:
            yield self
        finally:
            self._pool = None

    def rows(self, name: str, ids) -> np.ndarray:
        """Rows `ids` of tensor `name` (all of it when ids is None) as float64, converted by torch
        itself (bfloat16 included); size checked before, values (all finite) after."""
        import torch
        t, dtype = self._get(name), self.dtype(name)
        if dtype not in ITEMSIZE:
            raise ScenarioError(name, f"has dtype {dtype}; expected float64, float32, float16 or bfloat16 weights",
                                WHERE)
        if t.device.type == "meta":
            raise ScenarioError(name, "has no values (it is on the meta device); expected a model whose weights "
                                "are loaded", WHERE)
        shape = tuple(t.shape)
        cells = (len(ids) if ids is not None else shape[0] if shape else 1) * math.prod(shape[1:])
        if not memory.fits(cells * 8):
            raise ScenarioError(name, f"has shape {shape}: reading it {memory.shortfall(cells * 8)}", WHERE)
        part = t.detach() if ids is None else t.detach()[torch.as_tensor(list(ids), dtype=torch.long)]
        a = self._buffer(name, tuple(part.shape)) if ids is None else None
        a = np.empty(tuple(part.shape), dtype=np.float64) if a is None else a
        with torch.no_grad():
            torch.from_numpy(a).copy_(part)   # widened by torch, bfloat16 included, into a
        return _finite(name, a, WHERE, ids)

    def expert(self, name: str, e: int) -> np.ndarray:
        """Expert e's matrix of the stacked tensor `name`: a model in memory holds its experts
        unpacked (transformers dequantizes MXFP4 as it loads them on a CPU)."""
        return self.rows(name, [e])[0]

    def _buffer(self, name: str, shape: tuple) -> np.ndarray | None:
        if self._pool is None:
            return None
        key = (re.sub(r"\.\d+\.", ".#.", name), shape)
        if key not in self._pool:
            self._pool[key] = np.empty(shape, dtype=np.float64)
        return self._pool[key]

    def _get(self, name: str):
        import torch
        try:
            t = self._state[name]
        except KeyError:
            raise ScenarioError(name, "is missing from the model's state dict; expected every tensor of the "
                                "layers read", WHERE) from None
        if not isinstance(t, torch.Tensor):   # a list or a NumPy array put in by hand
            raise ScenarioError(name, f"is {kind(t)} in the model's state dict; expected a torch tensor, as "
                                "model.state_dict() holds them", WHERE)
        return t


def model_config(model) -> dict:
    """The model's config as config.json would hold it; anything else is refused by name."""
    config = getattr(model, "config", None)
    to_dict = getattr(config, "to_dict", None)
    if to_dict is None or not hasattr(model, "state_dict"):
        raise ScenarioError("model", f"expected a transformers model (with a config and a state dict), got {kind(model)}")
    data = to_dict()
    if not isinstance(data, dict):
        raise ScenarioError("model.config", f"expected a config that gives a dict, got {kind(data)}")
    return data


def saved_state(model) -> dict:
    """The model's tensors by the names its saved folder gives them: transformers (5 and later)
    keeps some tensors otherwise in memory (a mixture's experts fused into one) and turns them
    back when it saves; the same turn is taken here, in memory, so that the folder's loader reads
    them. Older transformers keep the saved layout in memory."""
    state = model.state_dict()
    try:
        from transformers.core_model_loading import revert_weight_conversion
    except ImportError:
        return state
    try:
        return revert_weight_conversion(model, state)
    except Exception as err:   # whatever a conversion of transformers' raises: one line naming it
        raise ScenarioError("model", f"its state dict cannot be put in the saved layout ({type(err).__name__}: "
                            f"{str(err)[:200]}); expected a model that transformers can save", WHERE) from None


def backend(tokenizer):
    """The `tokenizers.Tokenizer` behind a transformers tokenizer (a fast one), or the one given."""
    inner = getattr(tokenizer, "backend_tokenizer", tokenizer)
    if not (hasattr(inner, "encode") and hasattr(inner, "get_vocab_size") and hasattr(inner, "decoder")):
        raise ScenarioError("tokenizer", f"expected the model's fast tokenizer (a transformers tokenizer with a "
                            f"backend_tokenizer, or a tokenizers.Tokenizer), got {kind(tokenizer)}")
    return inner
