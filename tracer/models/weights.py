"""A checkpoint's tensors, read one at a time and only when asked for, widened to float64:
from model.safetensors or the shards its index names; bfloat16 straight from the file's bytes."""
from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np

from ..errors import ScenarioError
from ..readfile import regular
from .packages import require

INDEX = "model.safetensors.index.json"
INDEX_BYTES = 64 * 2**20               # an index is megabytes
SINGLE = "model.safetensors"
NUMPY_DTYPES = ("F64", "F32", "F16")   # what safetensors hands to NumPy itself; BF16 is read here


class Tensors:
    """The tensors of a checkpoint folder by name: `t[name]` (float64), `t.rows(name, ids)`,
    `name in t`. Every file is checked whole (header, size) first; then each read maps its file
    only while it reads, so the pages it touched leave memory with it."""

    def __init__(self, folder: Path):
        self._open = require("safetensors").safe_open
        self.folder, self._where, self._shapes = folder, {}, {}
        index = folder / INDEX
        if os.path.lexists(index):
            files = sorted(set(_weight_map(index).values()))
        elif os.path.lexists(folder / SINGLE):
            files = [SINGLE]
        else:
            raise ScenarioError(SINGLE, f"is missing (and there is no {INDEX}); expected the checkpoint's "
                                "weights in safetensors format", str(folder))
        for name in files:  # stat first: a FIFO or a device is refused before anything opens it
            regular(folder / name, name, "a safetensors file (a shard the index names)", str(folder))
            try:
                with self._open(str(folder / name), framework="numpy") as handle:
                    for key in handle.keys():
                        self._where[key] = name
                        self._shapes[key] = tuple(handle.get_slice(key).get_shape())
            except FileNotFoundError:
                raise ScenarioError(name, "is missing; expected the shard that the index names", str(folder)) from None
            except Exception as err:  # SafetensorError: a truncated or corrupt file
                raise ScenarioError(name, f"is not a readable safetensors file ({err}); expected the "
                                    "complete file (a download may have been cut short)", str(folder)) from None

    def __contains__(self, name: str) -> bool:
        return name in self._where

    @property
    def names(self) -> list[str]:
        return list(self._where)

    def shape(self, name: str) -> tuple[int, ...]:
        self._file(name)
        return self._shapes[name]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.rows(name, None)

    def rows(self, name: str, ids) -> np.ndarray:
        """Rows `ids` of tensor `name` (all of it when ids is None), as float64; only those rows
        are read from the file (an embedding matrix is never loaded whole)."""
        path = self._file(name)
        with self._open(str(path), framework="numpy") as handle:
            part = handle.get_slice(name)
            dtype = part.get_dtype()
            if dtype in NUMPY_DTYPES:
                if ids is None:
                    return part[:].astype(np.float64)
                return np.concatenate([part[i:i + 1] for i in ids]).astype(np.float64)
        if dtype != "BF16":
            raise ScenarioError(name, f"has dtype {dtype}; expected float32, float16 or bfloat16 weights", str(path))
        raw = self._bf16(path, name)
        return _widen_bf16(raw if ids is None else raw[np.asarray(ids)])

    def _file(self, name: str) -> Path:
        if name not in self._where:
            raise ScenarioError(name, "is missing from the checkpoint's safetensors; expected every tensor "
                                "of the layers read", str(self.folder))
        return self.folder / self._where[name]

    def _bf16(self, path: Path, name: str) -> np.ndarray:
        """The tensor's bytes, memory-mapped as 16-bit words (NumPy has no bfloat16); the file was
        checked whole when opened, so its header and offsets are sound."""
        with open(path, "rb") as f:
            size = struct.unpack("<Q", f.read(8))[0]
            start, _ = json.loads(f.read(size))[name]["data_offsets"]
        return np.memmap(path, dtype="<u2", mode="r", offset=8 + size + start, shape=self._shapes[name])


def _widen_bf16(words: np.ndarray) -> np.ndarray:
    """bfloat16 is the top half of a float32: shift the 16 bits up and read them as one."""
    return (np.asarray(words, dtype=np.uint32) << 16).view(np.float32).astype(np.float64)


def _weight_map(index: Path) -> dict:
    from .config import read_json
    data = read_json(index, INDEX_BYTES, "a JSON object with a weight_map of tensor name to shard file")
    try:
        mapping = data["weight_map"]
        if not isinstance(mapping, dict) or not all(isinstance(v, str) and "/" not in v for v in mapping.values()):
            raise TypeError("weight_map")
        return mapping
    except (KeyError, TypeError) as err:
        raise ScenarioError(INDEX, f"cannot be read ({type(err).__name__}: {err}); expected a JSON object with "
                            "a weight_map of tensor name to shard file", str(index.parent)) from None
