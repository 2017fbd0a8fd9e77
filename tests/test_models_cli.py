"""Checkpoints through the command line and scenario files: names found in the Hugging Face cache,
the [model] section, and every bad input ending in exit 2, one line, nothing written."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tiny_checkpoints as tc
import tracer
from tracer.models import layer_arrays
from tui.cli import main


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ckpt") / "tiny"
    tc.build("gpt2", folder, seed=5)
    return folder


@pytest.fixture
def copy(good, tmp_path):
    target = tmp_path / "copy"
    shutil.copytree(good, target)
    return target


def refused(capsys, argv, *words):
    """Runs the CLI; asserts exit 2, exactly one `attnsim: error:` line holding every word."""
    capsys.readouterr()   # what building the checkpoint printed
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("attnsim: error: "), err
    for word in words:
        assert word in err[0], (word, err[0])
    return err[0]


def show(folder, *rest, text=tc.TEXT):
    return ["show", "--model", str(folder), "--text", text, *rest]


def test_a_folder_that_is_not_a_checkpoint(capsys, tmp_path):
    refused(capsys, show(tmp_path), "config.json", "is missing")


def test_missing_weights(capsys, copy):
    (copy / "model.safetensors").unlink()
    refused(capsys, show(copy), "model.safetensors", "is missing")


def test_truncated_weights(capsys, copy):
    path = copy / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-100])
    refused(capsys, show(copy), "model.safetensors", "complete file")


def test_a_missing_shard(capsys, tmp_path):
    tc.build("gpt2", tmp_path, seed=6, shard="20KB")
    shard = sorted(tmp_path.glob("model-*.safetensors"))[0]
    shard.unlink()
    refused(capsys, show(tmp_path), shard.name, "is missing")


def test_missing_tokenizer(capsys, copy):
    (copy / "tokenizer.json").unlink()
    refused(capsys, show(copy), "tokenizer.json", "is missing")


@pytest.mark.parametrize("layer", ["3", "-1"])
def test_a_layer_out_of_range(capsys, good, layer):
    refused(capsys, show(good, "--layer", layer), "--layer", "from 0 to 2")


def test_text_longer_than_the_positions(capsys, good):
    refused(capsys, show(good, text="the cat sat on the mat " * 10), "--text", "at most 24")


@pytest.mark.parametrize("text", ["", "   "])
def test_empty_text(capsys, good, text):
    refused(capsys, show(good, text=text), "--text", "some text")


def test_an_unsupported_family_is_named(capsys, copy):
    cfg = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**cfg, "model_type": "bert"}))
    refused(capsys, show(copy), "model_type", "'bert'", "gpt2, llama, mistral, qwen2")


@pytest.mark.parametrize("changes,words", [
    ({"model_type": "mamba"}, ("model_type", "'mamba'", *(f"{name}," for name in ("qwen3", "qwen3_moe", "gpt_oss", "smollm3", "gemma2",
                                                        "gemma3_text", "olmo2", "phi3", "bloom", "falcon",
                                                        "deepseek_v2", "deepseek_v3")))),
    ({"partial_rotary_factor": 0.375}, ("partial_rotary_factor", "0.375", "even number")),
    ({"layer_types": ["full_attention", "chunked_attention", "full_attention"]}, ("layer_types", "sliding_attention")),
    ({"layer_types": ["sliding_attention"] * 3, "sliding_window": 0}, ("sliding_window", "≥ 1")),
    ({"use_bidirectional_attention": True}, ("use_bidirectional_attention", "not supported")),
])
def test_switches_attnsim_does_not_follow_are_named(capsys, tmp_path, changes, words):
    tc.build("llama", tmp_path, seed=2)
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, **changes}))
    refused(capsys, show(tmp_path), *words)


def test_an_unknown_tensor_dtype_is_named(capsys, tmp_path):
    from safetensors.numpy import load_file, save_file
    tc.build("llama", tmp_path, seed=2)
    tensors = load_file(tmp_path / "model.safetensors")
    name = "model.layers.0.self_attn.q_proj.weight"
    tensors[name] = tensors[name].astype(np.int8)
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    refused(capsys, show(tmp_path), name, "I8", "float32, float16 or bfloat16")


@pytest.mark.parametrize("params,words", [
    ({"rope_type": "dynamic", "rope_theta": 500000.0, "factor": 8.0}, ("rope_type", "'dynamic'", "linear, llama3, yarn")),
    ({"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0}, ("rope_parameters.low_freq_factor", "missing")),
    ({"type": "yarn", "factor": -2}, ("rope_scaling.factor", "> 0")),
])
def test_an_unknown_or_incomplete_rope_scaling_is_refused(capsys, tmp_path, params, words):
    tc.build("llama", tmp_path, seed=2)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["rope_scaling" if "type" in params else "rope_parameters"] = params
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    refused(capsys, show(tmp_path), *words)


@pytest.mark.parametrize("package", ["safetensors", "tokenizers"])
def test_missing_optional_packages_say_how_to_install(capsys, monkeypatch, good, package):
    monkeypatch.setitem(sys.modules, package, None)   # `import package` now raises ImportError
    refused(capsys, show(good), package, "pip install 'attnsim[models]'")


def test_an_unknown_name_offline_says_how_to_get_a_folder(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    refused(capsys, show("nobody/nothing"), "--model", "nobody/nothing", "--local-dir", "pip install huggingface_hub")


def test_a_failed_download_is_one_line(capsys, monkeypatch, tmp_path):
    import huggingface_hub

    def offline(*args, **kwargs):
        raise OSError("no network")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    refused(capsys, show("nobody/nothing"), "--model", "download failed")


def test_export_writes_nothing_on_bad_input(capsys, tmp_path, good):
    out = tmp_path / "out.json"
    refused(capsys, ["export", "--model", str(good), "--text", "", "-o", str(out)], "--text")
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_model_and_scenario_together_or_neither(capsys, good):
    refused(capsys, ["show", "by_hand", "--model", str(good), "--text", "a"], "SCENARIO", "not both")
    refused(capsys, ["show"], "SCENARIO", "--model")
    refused(capsys, ["show", "--model", str(good)], "--text", "missing")
    refused(capsys, ["show", "by_hand", "--layer", "1"], "--layer", "only with --model")


def test_no_traceback_from_a_real_process(tmp_path):
    run = subprocess.run([sys.executable, "-m", "tui.cli", "show", "--model", str(tmp_path), "--text", "hi"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr and "config.json" in run.stderr


# ---------------------------------------------------------------- names in the local cache
def _cache(root, name, folder):
    repo = root / ("models--" + name.replace("/", "--"))
    shutil.copytree(folder, repo / "snapshots" / "abc123")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")


def test_a_name_is_found_in_hf_hub_cache(monkeypatch, tmp_path, good):
    _cache(tmp_path, "org/tiny", good)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    got, want = layer_arrays("org/tiny", tc.TEXT, 1), layer_arrays(good, tc.TEXT, 1)
    np.testing.assert_array_equal(got["x"], want["x"])
    assert got["name"] == "tiny_layer1"


def test_a_name_is_found_under_hf_home(monkeypatch, tmp_path, good):
    _cache(tmp_path / "hub", "gpt2", good)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    assert layer_arrays("gpt2", tc.TEXT, 0)["tokens"] == layer_arrays(good, tc.TEXT, 0)["tokens"]


# ---------------------------------------------------------------- the [model] section
def _scenario_file(folder, body):
    path = folder / "mine.toml"
    path.write_text(body, encoding="utf-8")
    return path


def test_model_section_errors_name_the_file_and_field(capsys, tmp_path, good):
    shutil.copytree(good, tmp_path / "tiny")
    path = _scenario_file(tmp_path, '[model]\npath = "tiny"\ntext = "the cat"\nlayer = 7\n')
    line = refused(capsys, ["show", str(path)], "mine.toml: model.layer", "from 0 to 2")
    assert str(tmp_path / "tiny") not in line   # the relative path was found beside the file
    path = _scenario_file(tmp_path, '[model]\npath = "tiny"\ntext = "the cat"\nlayr = 1\n')
    refused(capsys, ["show", str(path)], "mine.toml: model.layr", "unknown field")
    path = _scenario_file(tmp_path, 'x = [[1]]\n[model]\npath = "tiny"\ntext = "the cat"\nlayer = 1\n')
    refused(capsys, ["show", str(path)], "mine.toml: x", "unknown field")
    path = _scenario_file(tmp_path, '[model]\npath = "elsewhere/none"\ntext = "a"\nlayer = 0\n')
    refused(capsys, ["show", str(path)], "mine.toml: model.path")


def test_model_section_reads_the_checkpoint_beside_the_file(tmp_path, good):
    from tracer.models import section_arrays
    shutil.copytree(good, tmp_path / "tiny")
    data = {"title": "Mine", "model": {"path": "tiny", "text": tc.TEXT, "layer": 1, "heads": [2, 0]}}
    got = section_arrays(data, str(tmp_path / "mine.toml"))
    want = layer_arrays(good, tc.TEXT, 1)
    assert got["name"] == "mine" and got["title"] == "Mine" and len(got["q"]) == 2
    np.testing.assert_array_equal(got["q"][0], want["q"][2])
    np.testing.assert_array_equal(got["o"], np.vstack([want["o"][16:24], want["o"][0:8]]))


# ---------------------------------------------------------------- through the tracer
def test_show_and_export_a_checkpoint_layer(capsys, tmp_path, good):
    assert main(show(good, "--layer", "1", "--step", "h0.weights", "--decimals")) == 0
    assert "h0.weights" in capsys.readouterr().out
    out = tmp_path / "t.json"
    assert main(["export", "--model", str(good), "--text", tc.TEXT, "--layer", "2", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    steps = {s["id"]: np.array(s["data"]) for s in doc["steps"]}
    want = tc.attend(layer_arrays(good, tc.TEXT, 2))
    np.testing.assert_allclose(steps["residual"], want["residual"], atol=1e-9 * np.abs(want["residual"]).max())
    assert doc["scenario"]["tokens"] == layer_arrays(good, tc.TEXT, 2)["tokens"]


def test_model_section_through_load_scenario(tmp_path, good):
    shutil.copytree(good, tmp_path / "tiny")
    path = _scenario_file(tmp_path, f'[model]\npath = "tiny"\ntext = "{tc.TEXT}"\nlayer = 1\n')
    trace = tracer.run(tracer.load_scenario(str(path)))
    want = tc.attend(layer_arrays(good, tc.TEXT, 1))
    np.testing.assert_allclose(trace.rows("h3.weights"), want["weights"][3], atol=1e-9)
