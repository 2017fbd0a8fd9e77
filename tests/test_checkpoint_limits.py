"""Checkpoint folders past the first probe: a tensor or a text too large for the memory left, a
weight that is inf or NaN, a block whose output leaves float64's range, a later block's broken
tensor found before any arithmetic, and a tokenizer whose pattern runs past the regex engine's limit.
Each is one `attnsim: error:` line naming the file and the tensor or key; the memory cases run in a
subprocess under an address-space limit and a timeout, so a regression fails, never fills the machine."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers", reason="the tiny checkpoints are made with transformers (test extra)")
pytest.importorskip("safetensors", reason="checkpoints need the models extra")

from test_limits import limited  # noqa: E402
from test_checkpoint_bad_folders import copy, edit_config, made, one_error, refused, reshaped  # noqa: E402,F401

CLI = "from tui.cli import main\nsys.exit(main(sys.argv[1:]))"


def sparse_gpt2(folder: Path, width: int, dtype: str) -> None:
    """A one-block GPT-2 of `width` whose model.safetensors declares every tensor but stores
    none (a sparse file of zeros): gigabytes to read that take no disk."""
    edit_config(folder, n_embd=width, n_head=1, n_layer=1, n_inner=4)
    d, size = width, {"F32": 4, "F16": 2}[dtype]
    shapes = {"wte.weight": (300, d), "wpe.weight": (24, d), "h.0.ln_1.weight": (d,), "h.0.ln_1.bias": (d,),
              "h.0.attn.c_attn.weight": (d, 3 * d), "h.0.attn.c_attn.bias": (3 * d,),
              "h.0.attn.c_proj.weight": (d, d), "h.0.attn.c_proj.bias": (d,)}
    header, start = {}, 0
    for name, shape in shapes.items():
        end = start + size * int(np.prod(shape))
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [start, end]}
        start = end
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(folder / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        f.truncate(8 + len(text) + start)


@pytest.mark.parametrize("width, dtype, words", [
    (8192, "F16", ["model.safetensors", "h.0.attn.c_attn.weight", "(8192, 24576)", "reading it needs about"]),
    (16384, "F32", ["model.safetensors", "cannot be mapped into memory", "needs about 4.0 GiB"])])
def test_a_tensor_larger_than_the_memory_left_is_refused_by_name(copy, width, dtype, words):
    folder = copy()
    sparse_gpt2(folder, width, dtype)
    done = limited(CLI, "show", "--model", str(folder), "--text", "the cat", "--step", "x", limit=2 << 30,
                   timeout=120)
    one_error(done, *words)


def test_a_text_too_long_for_the_earlier_blocks_is_refused_before_them(copy):
    folder = copy("llama")
    edit_config(folder, max_position_embeddings=10**6)   # no table of positions bounds the text
    done = limited(CLI, "show", "--model", str(folder), "--text", "the cat sat on the mat " * 1500, "--layer",
                   "1", "--step", "x", limit=2 << 30, timeout=120)
    one_error(done, "--text", "tokens; running block 0 on them needs about")


def poisoned(folder: Path, name: str, value: float, bf16: bool = False) -> None:
    """model.safetensors with one number of tensor `name` (row 1, column 2) set to `value`."""
    from safetensors.torch import load_file, save_file
    import torch
    tensors = load_file(folder / "model.safetensors")
    if bf16:
        tensors = {k: t.to(torch.bfloat16) for k, t in tensors.items()}
    tensors[name][1, 2] = value
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})


@pytest.mark.parametrize("family, name, value, bf16", [
    ("gpt2", "transformer.h.0.attn.c_attn.weight", float("nan"), False),
    ("gpt2", "transformer.h.1.mlp.c_proj.weight", float("inf"), False),
    ("llama", "model.layers.0.mlp.down_proj.weight", float("-inf"), True),
    ("llama", "model.embed_tokens.weight", float("nan"), True)])
def test_a_weight_that_is_not_finite_is_named_with_its_place(capsys, copy, family, name, value, bf16):
    folder = copy(family)
    poisoned(folder, name, value, bf16)
    refused(capsys, folder, f"model.safetensors: {name}: holds {value} at [1, 2]", "expected finite weights",
            rest=("--layer", "2"))   # row 1 of the embeddings: <s>, which the Llama tokenizer puts first


def test_a_block_whose_output_leaves_float64s_range_is_named_quietly(capsys, copy):
    from safetensors.numpy import load_file, save_file
    folder = copy()
    tensors = {k: t.astype(np.float64) for k, t in load_file(folder / "model.safetensors").items()}
    for name in ("transformer.h.0.mlp.c_fc.weight", "transformer.h.0.mlp.c_proj.weight"):
        tensors[name][:] = 1e200
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    refused(capsys, folder, str(folder), "block 0: leaves float64's range", rest=("--layer", "2"))  # one line:
    # no RuntimeWarning of NumPy's before it


@pytest.mark.parametrize("name, change", [("transformer.h.1.attn.c_proj.weight", (32, 31)),
                                          ("transformer.h.1.ln_2.weight", "int64")])
def test_a_broken_later_block_is_named_before_any_block_runs(capsys, copy, monkeypatch, name, change):
    import tracer.models.layer as layer
    folder = copy()
    if change == "int64":
        from safetensors.numpy import load_file, save_file
        tensors = load_file(folder / "model.safetensors")
        tensors[name] = tensors[name].astype(np.int64)
        save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    else:
        reshaped(folder, name, change)

    def ran(*args):
        raise AssertionError("a block ran before the checkpoint was checked whole")
    monkeypatch.setattr(layer, "run_block", ran)
    refused(capsys, folder, f"{folder / 'model.safetensors'}: {name}: has", rest=("--layer", "2"))


def test_a_tokenizer_pattern_past_the_regex_limit_is_one_error(capsys, copy):
    """A pattern that backtracks without end: the regex engine gives up (a Rust panic, a
    BaseException) and that is named as the tokenizer's fault, not a traceback."""
    folder = copy()
    path = folder / "tokenizer.json"
    tok = json.loads(path.read_text())
    split = {"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated", "invert": False}
    tok["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [split, tok["pre_tokenizer"]]}
    path.write_text(json.dumps(tok))
    refused(capsys, folder, "tokenizer.json: fails on the text", "retry-limit",
            text="a" * 30 + "b")

