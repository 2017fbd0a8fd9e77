"""Hostile checkpoint folders (issue 25's probe): a config that is /dev/zero, FIFOs named as the
config, a shard or the tokenizer, tensors of the wrong shape, counts of 0, nesting bombs, text that
is not UTF-8: each one `attnsim: error:` line and exit 2, never a hang, a traceback or a machine
filled (the slow-failure cases run in a subprocess under an address-space limit and a timeout)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers", reason="the tiny checkpoints are made with transformers (test extra)")
pytest.importorskip("safetensors", reason="checkpoints need the models extra")

import tiny_checkpoints as tc  # noqa: E402
from test_limits import limited  # noqa: E402
from tui.cli import main  # noqa: E402


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """family → a tiny checkpoint folder, made once for the module."""
    out = {}
    for family in ("gpt2", "llama"):
        out[family] = tmp_path_factory.mktemp(family) / "tiny"
        tc.build(family, out[family], seed=7)
    return out


@pytest.fixture
def copy(made, tmp_path):
    def of(family: str = "gpt2") -> Path:
        target = tmp_path / family
        shutil.copytree(made[family], target)
        return target
    return of


def refused(capsys, folder, *words, text=tc.TEXT, rest=()):
    capsys.readouterr()
    assert main(["show", "--model", str(folder), "--text", text, "--step", "x", *rest]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("attnsim: error: "), err
    for word in words:
        assert word in err[0], (word, err[0])
    return err[0]


def in_a_subprocess(folder: Path, seconds: float = 60) -> subprocess.CompletedProcess:
    """The CLI under a 3 GiB address-space limit and a timeout: a regression that reads /dev/zero
    whole fails on the limit, one that opens a FIFO on the timeout, neither fills the machine."""
    code = "from tui.cli import main\nsys.exit(main(sys.argv[1:]))"
    return limited(code, "show", "--model", str(folder), "--text", tc.TEXT, "--step", "x",
                   limit=3 << 30, timeout=seconds)


def one_error(done: subprocess.CompletedProcess, *words) -> None:
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-1500:]
    (line,) = done.stderr.strip().splitlines()
    for word in words:
        assert word in line, (word, line)


def test_a_config_that_is_dev_zero_is_refused_without_reading_it(copy):
    folder = copy()
    (folder / "config.json").unlink()
    (folder / "config.json").symlink_to("/dev/zero")
    one_error(in_a_subprocess(folder), "config.json", "not a regular file")


def test_validate_of_a_model_scenario_pointing_at_dev_zero(copy, tmp_path):
    folder = copy()
    (folder / "config.json").unlink()
    (folder / "config.json").symlink_to("/dev/zero")
    scenario = tmp_path / "m.toml"
    scenario.write_text(f'[model]\npath = "{folder}"\ntext = "the cat"\nlayer = 0\n')
    done = limited("from tui.cli import main\nsys.exit(main(sys.argv[1:]))", "validate", str(scenario),
                   limit=3 << 30, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "not a regular file" in done.stderr


@pytest.mark.parametrize("name", ["config.json", "tokenizer.json", "model.safetensors"])
def test_a_fifo_is_refused_before_it_is_opened(copy, name):
    folder = copy()
    (folder / name).unlink()
    os.mkfifo(folder / name)
    one_error(in_a_subprocess(folder), name, "not a regular file")


def test_a_fifo_shard_named_by_the_index(copy):
    folder = copy()
    (folder / "model.safetensors").rename(folder / "part-1.safetensors")
    os.mkfifo(folder / "part-2.safetensors")
    names = json.loads((folder / "config.json").read_text())  # noqa: F841  (a real index names every tensor)
    from safetensors import safe_open
    with safe_open(str(folder / "part-1.safetensors"), framework="numpy") as f:
        mapping = {k: "part-1.safetensors" for k in f.keys()}
    mapping[next(iter(mapping))] = "part-2.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": mapping}))
    one_error(in_a_subprocess(folder), "part-2.safetensors", "not a regular file")


def test_a_config_too_large_and_a_bomb_of_nesting(capsys, copy):
    folder = copy()
    (folder / "config.json").write_text(" " * (2**20 + 1))
    refused(capsys, folder, "config.json", "larger than 1 MiB")
    (folder / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    refused(capsys, folder, "config.json", "nested too deeply")
    folder = copy("llama")
    (folder / "model.safetensors").rename(folder / "a.safetensors")
    (folder / "model.safetensors.index.json").write_text('{"weight_map": ' + "[" * 100_000 + "]" * 100_000 + "}")
    refused(capsys, folder, "model.safetensors.index.json", "nested too deeply")


def edit_config(folder: Path, **changes):
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (folder / "config.json").write_text(json.dumps(cfg))


@pytest.mark.parametrize("family, key, value, words", [
    ("gpt2", "n_head", 0, ["n_head", "≥ 1"]), ("llama", "num_attention_heads", 0, ["num_attention_heads", "≥ 1"]),
    ("llama", "num_key_value_heads", 0, ["num_key_value_heads", "≥ 1"]), ("gpt2", "n_layer", 0, ["n_layer", "≥ 1"]),
    ("gpt2", "model_type", ["gpt2"], ["model_type", "not supported"]),
    ("llama", "rope_theta", float("inf"), ["config.json", "rope_theta", "finite"])])
def test_config_values_name_the_key_of_config_json(capsys, copy, family, key, value, words):
    folder = copy(family)
    if key == "rope_theta":
        cfg = json.loads((folder / "config.json").read_text())
        cfg.pop("rope_parameters", None)
        (folder / "config.json").write_text(json.dumps({**cfg, "rope_theta": value}))  # Infinity
    else:
        edit_config(folder, **{key: value})
    line = refused(capsys, folder, *words)
    assert "config.json" in line and "--layer" not in line and "rope.base" not in line


LLAMA3 = dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, rope_theta=500.0)


@pytest.mark.parametrize("changes, words", [
    (dict(partial_rotary_factor=float("nan")), ["partial_rotary_factor: expected a number from 0 to 1", "(nan)"]),
    (dict(partial_rotary_factor=1e308), ["partial_rotary_factor: expected a number from 0 to 1", "(1e+308)"]),
    (dict(model_type="mistral", sliding_window=2**31), ["sliding_window: expected a whole number ≥ 1 and at most "
                                                        "2147483647", "(2147483648)"]),
    (dict(rope_parameters=dict(LLAMA3, original_max_position_embeddings=0)),   # was replaced by max_position_embeddings
     ["rope_parameters.original_max_position_embeddings: expected a finite number > 0, got a number (0)"]),
    (dict(original_max_position_embeddings=0, rope_parameters=LLAMA3),
     ["json: original_max_position_embeddings: expected a finite number > 0, got a number (0)"])])
def test_rotary_and_window_values_are_refused_naming_config_json(capsys, copy, changes, words):
    """A NaN partial rotary factor was a traceback, a window past 2^31 was blamed on `mask`, and a
    pretraining length of 0 was silently replaced by the next key's."""
    folder = copy("llama")
    edit_config(folder, **changes)
    line = refused(capsys, folder, "config.json: ", *words)
    assert "mask" not in line


def test_yarn_betas_at_the_ends_of_float64_are_computed(capsys, copy):
    """β·2π overflowed float64 for β = 1e308 (a math domain error). The ramp's ends are logarithms
    float64 holds: d·ln(L / (β·2π)) / (2·ln base) is −456.3 for β_fast = 1e308 (the ramp starts at
    pair 0) and 456.6 for β_slow = 1e-308 (it ends at d − 1 = 7): pair i moves i/7 of the way."""
    import tracer
    folder = copy("llama")
    edit_config(folder, rope_parameters=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=8,
                                             beta_fast=1e308, beta_slow=1e-308, rope_theta=500.0))
    capsys.readouterr()
    assert main(["show", "--model", str(folder), "--text", tc.TEXT, "--step", "freqs"]) == 0
    assert capsys.readouterr().err == ""
    freqs = tracer.run(tracer.from_model(folder, tc.TEXT, 0))["freqs"][:, 0]
    theta = 500.0 ** (-np.arange(0, 8, 2) / 8)
    np.testing.assert_allclose(freqs, theta * (1 - 0.75 * np.arange(4) / 7), rtol=1e-15)


def test_a_layer_count_beyond_the_blocks_of_the_checkpoint_is_refused_first(capsys, copy, monkeypatch):
    """config.json says 10^7 layers where the tensors hold 3: refused naming the key, before any
    layer's window, rotary positions or experts are listed (that took 35 s and 1.8 GB, and layer 0
    was then traced as if nothing were wrong)."""
    from tracer.models import config
    monkeypatch.setattr(config, "_kinds", lambda *a: pytest.fail("listed each layer's kind first"))
    folder = copy("llama")
    edit_config(folder, num_hidden_layers=10**7)
    refused(capsys, folder, "config.json: num_hidden_layers: says 10000000 layers", "the blocks of 3",
            "expected at most 3")


def reshaped(folder: Path, name: str, shape: tuple) -> None:
    """Rewrites model.safetensors with tensor `name` replaced by one of `shape`."""
    from safetensors.numpy import load_file, save_file
    tensors = load_file(folder / "model.safetensors")
    tensors[name] = np.ones(shape, dtype=tensors[name].dtype)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})


GPT2_BROKEN = [("h.0.attn.c_proj.weight", (32, 31)), ("h.0.ln_1.weight", (31,)), ("h.1.mlp.c_fc.weight", (32, 47)),
               ("wpe.weight", (3, 32)), ("wte.weight", (300 * 32,)), ("wte.weight", (2, 300, 32)),
               ("h.0.attn.c_attn.bias", (7,)), ("h.0.attn.c_attn.weight", (32, 95)), ("h.0.mlp.c_proj.bias", (33,))]


@pytest.mark.parametrize("name, shape", GPT2_BROKEN)
def test_gpt2_tensors_of_the_wrong_shape_are_named(capsys, copy, name, shape):
    folder = copy()
    full = "transformer." + name if "transformer.h.0.ln_1.weight" in _names(folder) else name
    reshaped(folder, full, shape)
    refused(capsys, folder, full, "has shape", "expected", rest=("--layer", "2"))


@pytest.mark.parametrize("name, shape", [("layers.0.self_attn.k_proj.weight", (15, 32)),
                                         ("layers.1.mlp.down_proj.weight", (32, 47)),
                                         ("layers.0.input_layernorm.weight", (33,)),
                                         ("embed_tokens.weight", (300, 31))])
def test_llama_tensors_of_the_wrong_shape_are_named(capsys, copy, name, shape):
    folder = copy("llama")
    reshaped(folder, "model." + name, shape)
    refused(capsys, folder, "model." + name, "has shape", rest=("--layer", "2"))


def _names(folder: Path) -> set:
    from safetensors import safe_open
    with safe_open(str(folder / "model.safetensors"), framework="numpy") as f:
        return set(f.keys())


def test_text_that_is_not_utf8_is_one_line(made):
    done = subprocess.run([sys.executable, "-m", "tui", "show", "--model", str(made["gpt2"]), "--text",
                           b"the \xff cat", "--step", "x"], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parent.parent)
    one_error(done, "text", "UTF-8")
