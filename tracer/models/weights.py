"""A checkpoint's tensors, read one at a time and only when asked for, widened to float64:
from model.safetensors or the shards its index names; bfloat16 straight from the file's bytes."""
from __future__ import annotations

import contextlib
import json
import math
import os
import re
import struct
from pathlib import Path

import numpy as np

from .. import memory
from ..errors import ScenarioError
from ..readfile import checkpoint_json, regular
from . import fp8
from .packages import require

INDEX = "model.safetensors.index.json"
INDEX_BYTES = 64 * 2**20               # an index is megabytes
SINGLE = "model.safetensors"
NUMPY_DTYPES = ("F64", "F32", "F16")   # what safetensors hands to NumPy itself; BF16 is read here
DTYPES = NUMPY_DTYPES + ("BF16",)
ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 4, "F8_E4M3": 1}   # bytes a cell takes before float64 (BF16: widened)


class Tensors:
    """The tensors of a checkpoint folder by name: `t[name]` (float64), `t.rows(name, ids)`,
    `name in t`. Every file is checked whole (header, size) first; then each read maps its file
    only while it reads, so the pages it touched leave memory with it."""

    def __init__(self, folder: Path):
        self._open = require("safetensors").safe_open
        self.folder, self._where, self._shapes, self._dtypes = folder, {}, {}, {}
        self._pool: dict | None = None      # float64 buffers reused block after block (reusing())
        self._offsets: dict = {}            # a file's header, read once for its bfloat16 tensors
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
                        part = handle.get_slice(key)
                        self._where[key] = name
                        self._shapes[key], self._dtypes[key] = tuple(part.get_shape()), part.get_dtype()
            except FileNotFoundError:
                raise ScenarioError(name, "is missing; expected the shard that the index names", str(folder)) from None
            except Exception as err:  # SafetensorError: a truncated or corrupt file, or one too large to map
                raise _unreadable(folder / name, err) from None

    def __contains__(self, name: str) -> bool:
        return name in self._where

    @property
    def names(self) -> list[str]:
        return list(self._where)

    def shape(self, name: str) -> tuple[int, ...]:
        self._file(name)
        return self._shapes[name]

    def dtype(self, name: str) -> str:
        self._file(name)
        return self._dtypes[name]

    def where(self, name: str) -> str:
        """The file that holds tensor `name`, for messages."""
        return str(self._file(name))

    def __getitem__(self, name: str) -> np.ndarray:
        return self.rows(name, None)

    @contextlib.contextmanager
    def reusing(self):
        """Whole tensors read meanwhile are widened into buffers kept by their place in a block
        (`layers.#.mlp.up_proj.weight`), so that block after block of the same shapes fills the
        same memory rather than fresh pages: for a caller that lets each block go before the next
        is read (the earlier blocks of a layer), never for arrays it hands on."""
        self._pool = {}
        try:
            yield self
        finally:
            self._pool = None

    def _buffer(self, name: str, shape: tuple) -> np.ndarray | None:
        if self._pool is None:
            return None
        key = (re.sub(r"\.\d+\.", ".#.", name), shape)
        if key not in self._pool:
            self._pool[key] = np.empty(shape, dtype=np.float64)
        return self._pool[key]

    def rows(self, name: str, ids) -> np.ndarray:
        """Rows `ids` of tensor `name` (all of it when ids is None), as float64; only those rows
        are read from the file (an embedding matrix is never loaded whole). Its size is checked
        against the memory left before, its values (all finite) after."""
        path, shape, dtype = self._file(name), self._shapes[name], self._dtypes[name]
        if dtype == fp8.DTYPE and fp8.scale_name(name) in self:   # fine-grained FP8 (DeepSeek-V3, Qwen3-FP8)
            fp8.check(self, name, shape)
            codes = self._words(path, name, "u1")
            codes = codes[:] if ids is None else codes[np.asarray(ids)]
            return _finite(name, fp8.dequantize(codes, fp8.scales(self, name), fp8.block(self), ids), path, ids)
        if dtype not in DTYPES:
            raise ScenarioError(name, f"has dtype {dtype}; expected float64, float32, float16 or bfloat16 weights",
                                str(path))
        cells = (len(ids) if ids is not None else shape[0] if shape else 1) * math.prod(shape[1:])
        need = cells * (8 + ITEMSIZE[dtype])   # the file's numbers, then their float64 copy
        if not memory.fits(need):
            raise ScenarioError(name, f"has shape {shape}: reading it {memory.shortfall(need)}", str(path))
        if dtype == "BF16":
            raw = self._words(path, name, "<u2")
            wide, finite = _widen_bf16(raw if ids is None else raw[np.asarray(ids)],
                                       self._buffer(name, shape) if ids is None else None)
            return wide if finite else _finite(name, wide, path, ids)
        with self._open(str(path), framework="numpy") as handle:
            if ids is None:
                read = handle.get_tensor(name)   # (a slice [:] of a 0-d tensor, a scalar, is refused)
            else:
                part = handle.get_slice(name)
                read = np.concatenate([part[i:i + 1] for i in ids])
        _finite(name, read, path, ids)   # as read: widening keeps every value, and reads half the bytes or fewer
        out = self._buffer(name, shape) if ids is None else None
        if out is None:
            return read.astype(np.float64)
        np.copyto(out, read)
        return out

    def expert(self, name: str, e: int) -> np.ndarray:
        """Expert e's matrix of the stacked tensor `name` (experts × in × out), float64: read as
        saved, or from MXFP4 blocks and scales (gpt-oss), dequantized as it is read."""
        if name in self:
            return self.rows(name, [e])[0]
        from .mxfp4 import check_scales, dequantize
        blocks, scales = (self._raw(name + part, e) for part in ("_blocks", "_scales"))
        check_scales(scales, name + "_scales", e, self.where(name + "_scales"))
        return dequantize(blocks, scales)

    def _raw(self, name: str, e: int) -> np.ndarray:
        """Row e of a uint8 tensor as stored."""
        with self._open(str(self._file(name)), framework="numpy") as handle:
            return handle.get_slice(name)[e:e + 1][0]

    def _file(self, name: str) -> Path:
        if name not in self._where:
            raise ScenarioError(name, "is missing from the checkpoint's safetensors; expected every tensor "
                                "of the layers read", str(self.folder))
        return self.folder / self._where[name]

    def _words(self, path: Path, name: str, word: str) -> np.ndarray:
        """The tensor's bytes, memory-mapped as `word`s (NumPy has no bfloat16 or float8: 16-bit
        and 8-bit unsigned words); the file was checked whole when opened, so its header and
        offsets are sound."""
        if path not in self._offsets:
            with open(path, "rb") as f:
                size = struct.unpack("<Q", f.read(8))[0]
                self._offsets[path] = 8 + size, json.loads(f.read(size))
        data, header = self._offsets[path]
        start, _ = header[name]["data_offsets"]
        return np.memmap(path, dtype=word, mode="r", offset=data + start, shape=self._shapes[name])


def _finite(name: str, a: np.ndarray, path: Path, ids=None) -> np.ndarray:
    """The tensor (rows `ids` of it), refused by name when it holds an inf or a NaN (a corrupt or
    diverged file): it would surface later as a bad value of x, far from its cause."""
    bad = ~np.isfinite(a)
    if bad.any():
        at = [int(i) for i in np.unravel_index(int(np.argmax(bad)), a.shape)]
        value = a[tuple(at)]
        if ids is not None:   # the row of the tensor, not of the rows read
            at[0] = list(ids)[at[0]]
        raise ScenarioError(name, f"holds {value} at {at}; expected finite weights (the file "
                            "may be corrupt)", str(path))
    return a


def _unreadable(path: Path, err: Exception) -> ScenarioError:
    """A safetensors file that cannot be opened: too large to map under this process's limits, or
    truncated or corrupt."""
    if "os error 12" in str(err):   # ENOMEM: mmap refused the whole file
        size = path.stat().st_size
        return ScenarioError(path.name, f"cannot be mapped into memory ({memory.shortfall(size)}); expected a "
                             "process allowed to map the whole file", str(path.parent))
    return ScenarioError(path.name, f"is not a readable safetensors file ({err}); expected the complete file (a "
                         "download may have been cut short)", str(path.parent))


def _widen_bf16(words: np.ndarray, out: np.ndarray | None = None) -> tuple[np.ndarray, bool]:
    """(the words as float64, whether all are finite). bfloat16 is the top half of a float32: shift
    the 16 bits up and read them as one; a million at a time through one small scratch, into `out`
    when given (no fresh pages), each million checked while in cache (a pass over the float64 copy
    afterwards took two thirds as long as the widening)."""
    out = np.empty(words.shape, dtype=np.float64) if out is None else out
    flat, into = words.reshape(-1), out.reshape(-1)
    step = max(1, min(flat.size, 2**20))
    scratch, ok = np.empty(step, dtype=np.uint32), np.empty(step, dtype=bool)
    finite = True
    with np.errstate(invalid="ignore"):   # a signalling NaN's cast: the caller names it, unwarned
        for start in range(0, flat.size, step):
            part = scratch[: min(step, flat.size - start)]
            np.left_shift(flat[start:start + part.size], 16, out=part, dtype=np.uint32)
            into[start:start + part.size] = part.view(np.float32)
            finite = finite and bool(np.isfinite(part.view(np.float32), out=ok[:part.size]).all())
    return out, finite


def _weight_map(index: Path) -> dict:
    data = checkpoint_json(index, INDEX_BYTES, "a JSON object with a weight_map of tensor name to shard file")
    try:
        mapping = data["weight_map"]
        if not isinstance(mapping, dict) or not all(isinstance(v, str) and "/" not in v for v in mapping.values()):
            raise TypeError("weight_map")
        return mapping
    except (KeyError, TypeError) as err:
        raise ScenarioError(INDEX, f"cannot be read ({type(err).__name__}: {err}); expected a JSON object with "
                            "a weight_map of tensor name to shard file", str(index.parent)) from None
