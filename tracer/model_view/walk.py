"""Where the model view's numbers come from: MODEL resolved to a checkpoint folder (and a built-in's
own text), then the checkpoint streamed block by block, each block read once into buffers the next
reuses, run once, and let go: what each layer's kind saw on the way is handed on as it comes."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import numpy as np

from .. import memory
from ..errors import ScenarioError
from ..models import blocks
from ..models.blocks import check_shapes, embed, embed_norm, prefix
from ..models.config import Config
from ..models.forward import norm
from ..models.hub import find_checkpoint
from .kinds import kind_of

BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1}
DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "F8_E4M3": "float8_e4m3"}


def resolve(spec, text, base: Path | None = None) -> tuple[Path, str | None, str]:
    """(checkpoint folder, text, name) of MODEL as `--model` takes it (a folder, or a model name in
    the Hugging Face cache) or a scenario with a [model] section (the built-in induction, a .toml):
    that section's checkpoint, and its text unless `text` is given. A folder wins over a name."""
    if isinstance(spec, (str, os.PathLike)):
        s = os.fspath(spec)
        if not Path(s).expanduser().is_dir() and (s.endswith(".toml") or _builtin(s)):
            return _section(s, text)
    folder = find_checkpoint(spec, base)
    name = Path(os.fspath(spec)).name if isinstance(spec, (str, os.PathLike)) else ""
    return folder, text, name or folder.name


def _builtin(name: str) -> bool:
    from ..scenario.files import builtin_names
    return name in builtin_names()


def _section(spec: str, text) -> tuple[Path, str | None, str]:
    from ..scenario.files import read_toml, resolve_path
    path = resolve_path(spec)
    data = read_toml(path)
    section = data.get("model") if isinstance(data, dict) else None
    if not isinstance(section, dict) or "path" not in section:
        raise ScenarioError("model.path", f"{spec!r} is a scenario without a [model] section; expected a checkpoint "
                            "folder, a model name, or a model built-in such as induction")
    try:
        folder = find_checkpoint(section["path"], path.parent)
    except ScenarioError as err:
        raise err.at(str(path)) from None
    return folder, section.get("text") if text is None else text, path.stem


def itemsize(tensors, cfg: Config) -> tuple[str, int]:
    """The checkpoint's dtype and its bytes a number, as a cache holds them: the dtype its token
    embeddings are saved in (never quantized, unlike an FP8 or MXFP4 checkpoint's matrices)."""
    saved = tensors.dtype(prefix(tensors, cfg) + cfg.family.embed + ".weight")
    return DTYPES.get(saved, saved.lower()), BYTES.get(saved, 4)


def check(tensors, cfg: Config, n: int) -> None:
    """Before any block runs (and before anything is printed): every tensor's shape and dtype
    against config.json, and the working memory of n tokens against what this process has left."""
    pre, shapes = prefix(tensors, cfg), blocks.shapes
    for i in range(cfg.layers):   # every block whole, the last one's MLP too
        check_shapes(tensors, cfg, shapes(cfg, pre, i, True))
    need = 8 * (3 * cfg.heads * n * n + n * (4 * cfg.d_model + 3 * cfg.inner))   # as the traced layer's stream
    if not memory.fits(need):
        raise ScenarioError("model.text", f"gives {n} tokens; running the blocks on them {memory.shortfall(need)}")


def layers(tensors, cfg: Config, ids: list[int]) -> Iterator[tuple[object, object]]:
    """(kind, what it saw) for each layer in turn (`check` passed first): the embeddings through the
    blocks, one block held at a time."""
    x = norm(embed(tensors, cfg, ids), embed_norm(tensors, cfg))
    with tensors.reusing():   # block after block into the same buffers: peak memory is one block's
        for i in range(cfg.layers):
            kind = kind_of(cfg, i)
            with np.errstate(all="ignore"):
                x, seen = kind.run(x, tensors)
            if not np.isfinite(x).all():
                raise ScenarioError(f"block {i}", "leaves float64's range (the residual stream after it holds inf "
                                    "or NaN); expected weights whose outputs stay finite", str(tensors.folder))
            yield kind, seen
            del seen   # the matrices are the caller's now: not held through the next block
