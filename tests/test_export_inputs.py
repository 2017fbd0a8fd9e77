"""An export never replaces its own input (issue 25, item 10): the scenario file, a hard or
symbolic link to it, an array file it names, anything in a checkpoint folder; one line, exit 2,
the input unchanged, for every format."""
import os
import shutil

import numpy as np
import pytest

from tui.cli import main

SCENARIO = """x = "inputs.npy"
[weights]
q = [[1, 0], [0, 1]]
k = [[1, 0], [0, 1]]
v = [[1, 0], [0, 1]]
"""


@pytest.fixture
def folder(tmp_path):
    np.save(tmp_path / "inputs.npy", np.array([[1.0, 2.0], [3.0, 4.0]]))
    (tmp_path / "in.toml").write_text(SCENARIO)
    os.link(tmp_path / "in.toml", tmp_path / "hard.toml")
    (tmp_path / "soft.toml").symlink_to(tmp_path / "in.toml")
    return tmp_path


def refused(capsys, argv, *words):
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("attnsim: error: -o: "), err
    for word in words:
        assert word in err[0]


@pytest.mark.parametrize("target", ["in.toml", "hard.toml", "soft.toml", "inputs.npy"])
@pytest.mark.parametrize("fmt", ["json", "npz", "csv", "md", "svg"])
def test_the_runs_own_inputs_are_refused(capsys, folder, target, fmt):
    if fmt == "svg":
        pytest.importorskip("matplotlib")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    refused(capsys, ["export", str(folder / "in.toml"), "-o", str(folder / target), "--format", fmt],
            target, "an input of this run")
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_a_built_in_scenario_file_is_refused_too(capsys, tmp_path):
    import tracer
    from tracer.scenario import scenarios_dir
    target = scenarios_dir() / "by_hand.toml"
    before = target.read_bytes()
    refused(capsys, ["export", "by_hand", "-o", str(target), "--format", "json"], "an input of this run")
    assert target.read_bytes() == before
    with pytest.raises(tracer.ScenarioError, match="an input of this run"):
        tracer.figure(tracer.run("by_hand"), target, fmt="svg")


def test_another_path_beside_them_is_written(capsys, folder):
    assert main(["export", str(folder / "in.toml"), "-o", str(folder / "out.json")]) == 0


def test_anything_in_the_checkpoint_folder_is_refused(capsys, tmp_path):
    pytest.importorskip("transformers")
    import tiny_checkpoints as tc
    model = tmp_path / "tiny"
    tc.build("gpt2", model, seed=3)
    before = {p.name: p.read_bytes() for p in model.iterdir()}
    for target in ("config.json", "new.json"):
        refused(capsys, ["export", "--model", str(model), "--text", tc.TEXT, "-o", str(model / target),
                         "--format", "json"], "checkpoint folder")
    assert {p.name: p.read_bytes() for p in model.iterdir()} == before
    shutil.rmtree(model)


def test_a_file_the_checkpoint_folder_links_to_is_refused(capsys, tmp_path):
    """The Hugging Face cache keeps a snapshot's files as links into blobs/: writing over a blob
    would replace the checkpoint's config, though the blob is outside the folder."""
    pytest.importorskip("transformers")
    import tiny_checkpoints as tc
    made, blobs, snapshot = tmp_path / "made", tmp_path / "blobs", tmp_path / "snapshots" / "abc"
    tc.build("gpt2", made, seed=3)
    blobs.mkdir()
    snapshot.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        (made / name).rename(blobs / name.replace(".", "_"))
        os.symlink(os.path.join("..", "..", "blobs", name.replace(".", "_")), snapshot / name)
    before = {p.name: p.read_bytes() for p in blobs.iterdir()}
    for fmt in ("json", "md", "npz"):
        refused(capsys, ["export", "--model", str(snapshot), "--text", tc.TEXT, "-o", str(blobs / "config_json"),
                         "--format", fmt], "config_json", "config.json", "an input of this run")
    assert {p.name: p.read_bytes() for p in blobs.iterdir()} == before
