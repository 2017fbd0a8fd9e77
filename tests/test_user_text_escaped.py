"""User text that could reach a terminal or a file raw: control characters and lone surrogates in
every string field, file names that are not UTF-8 or hold escapes, and names like `..toml`."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import tracer
from tracer.export import write_export
from tui.cli import main

GOOD = "x = [[1, 0], [0, 1]]\n[weights]\nq = [[1], [0]]\nk = [[1], [1]]\nv = [[1], [2]]\n"
HOSTILE = ["\x1b]0;pwned\x07", "\x1b[2J", "a\x00b", "\x9b31m", "\u2028", "\ud800", "\udcff", "x\x7f"]


def arrays(**kw):
    return dict(x=np.eye(2), q=[[1.0], [0.0]], k=[[1.0], [1.0]], v=[[1.0], [2.0]], **kw)


@pytest.mark.parametrize("bad", HOSTILE)
@pytest.mark.parametrize("field", ["tokens", "features", "title", "description", "name"])
def test_every_string_field_refuses_control_characters_and_surrogates(field, bad):
    value = [bad, "b"] if field in ("tokens", "features") else f"ok {bad}"
    with pytest.raises(tracer.ScenarioError) as info:
        tracer.from_arrays(**arrays(**{field: value}))
    message = str(info.value)
    assert message.startswith(field) and message.isprintable()
    message.encode("utf-8")   # no lone surrogate in the message either


def test_a_description_keeps_its_lines_and_tabs():
    sc = tracer.from_arrays(**arrays(description="line one\n\tline two\r\nthree"))
    assert sc.description.count("\n") == 2


@pytest.mark.parametrize("stem", ["..", " .", ". ", "...", " "])
def test_files_named_with_dots_and_spaces_load(tmp_path, stem):
    path = tmp_path / f"{stem}.toml"
    path.write_text(GOOD)
    scenario = tracer.load_scenario(str(path))
    assert scenario.name == "scenario"
    assert main(["show", str(path), "--step", "h0.weights"]) == 0


@pytest.mark.parametrize("stem", [b"caf\xe9", b"\xff\xfe", b"esc\x1b[2Jape", b"bell\x07", b"new\nline"])
def test_file_names_that_are_not_text_load_and_export(tmp_path, capsys, stem):
    path = os.path.join(os.fsencode(tmp_path), stem + b".toml")
    with open(path, "w") as f:
        f.write(GOOD)
    scenario = tracer.load_scenario(os.fsdecode(path))
    assert scenario.name.isprintable()
    scenario.name.encode("utf-8")
    trace = tracer.run(scenario)
    for fmt in ("json", "md", "csv", "npz"):
        target = tmp_path / f"out.{fmt}"
        write_export(trace, target)
        assert target.exists()
        if fmt in ("json", "md", "csv"):
            text = target.read_text(encoding="utf-8")
            assert "\x1b" not in text and "\x07" not in text
    json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    assert main(["show", os.fsdecode(path), "--step", "h0.weights"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out


def test_messages_naming_a_hostile_file_are_one_printable_line(tmp_path, capsys):
    path = os.path.join(os.fsencode(tmp_path), b"\xff\x1b]0;x\x07.toml")
    with open(path, "w") as f:
        f.write("x = [[1, 2], [3]]\n")
    assert main(["validate", os.fsdecode(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "\x07" not in err
    err.encode("utf-8")
