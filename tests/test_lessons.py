"""What the lessons (the built-ins' descriptions) and the steps' "why" tell a reader is on screen:
the columns they name are labelled so, the steps and commands they suggest exist and run, and
`show` leaves out the TUI's key hints."""
from __future__ import annotations

import re
import shlex

import numpy as np
import pytest

import tracer
from tui.cli import main
from tui.tables import step_table

MODEL_BUILTINS = ("gpt2_small", "gpt3_layer", "induction")
SMALL = [n for n in tracer.builtin_names() if n not in MODEL_BUILTINS]
STEP_ID = re.compile(r"(?<![\w.`-])((?:prefill\.|t\d+\.)?(?:h|kv)\d+(?:\.blk\d+)?\.[a-z_]+)\b")
COMMAND = re.compile(r"attnsim ((?:[\w.=:-]+ ?)+)")   # (a mask=sliding:2 holds a colon)


def lesson(name: str) -> str:
    """The built-in's description as the TOML gives it (what load_scenario keeps), read without
    building the scenario: the parametrize lists below read every one at collection."""
    data = tracer.scenario.files.read_toml(tracer.scenario.files.scenarios_dir() / f"{name}.toml")
    return " ".join(data.get("description", "").split())


def header_and_rows(trace, sid: str) -> tuple[list[str], dict[str, list[str]]]:
    lines = step_table(trace, trace.step(sid)).splitlines()
    return lines[1].split()[1:], {line.split()[0]: line.split()[1:] for line in lines[2:]}


@pytest.mark.parametrize("name,meaning", [("bank_river", "water"), ("bank_money", "finance")])
def test_the_value_columns_a_lesson_names_are_labelled_so(name, meaning):
    assert f'mostly "{meaning}"' in lesson(name)
    trace = tracer.run(name)
    for sid in ("h0.v", "h0.z"):
        header, rows = header_and_rows(trace, sid)
        assert header == ["water", "finance", "place"], (sid, header)   # 0 1 2 before
    z = trace.rows("h0.z")[trace.scenario.tokens.index("bank")]
    assert ["water", "finance", "place"][int(np.argmax(z))] == meaning   # what "bank" takes in, from the numbers


def test_low_rank_columns_that_stay_zero_are_named():
    assert '"fruit" and "baked" never pass through' in lesson("low_rank")
    trace = tracer.run("low_rank")
    header, rows = header_and_rows(trace, "h0.z")
    assert header[:2] == ["fruit", "baked"]
    assert all(row[0] == row[1] == "0" for row in rows.values())
    np.testing.assert_array_equal(trace.rows("h0.z")[:, :2], 0.0)


def test_value_features_must_match_d_v(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('x = [[1, 0]]\nvalue_features = ["a"]\n[weights]\nq = [[1], [0]]\nk = [[1], [0]]\n'
                    'v = [[1, 0], [0, 1]]\n', encoding="utf-8")
    with pytest.raises(tracer.ScenarioError, match=r"value_features: expected 2 labels \(one per value feature, d_v\)"):
        tracer.load_scenario(path)


@pytest.mark.parametrize("name", SMALL)
def test_every_step_a_lesson_names_exists(name):
    text = lesson(name)
    ids = {s.id for s in tracer.run(name).steps}
    for m in STEP_ID.finditer(text):
        if text[:m.start()].endswith("--step "):
            continue   # a command's: the command is run below
        other = re.search(r"(\w+)'s $", text[:m.start()])
        owner = other.group(1) if other and other.group(1) in tracer.builtin_names() else name
        assert m.group(1) in ({s.id for s in tracer.run(owner).steps} if owner != name else ids), (name, m.group(1))


@pytest.mark.parametrize("name", [n for n in tracer.builtin_names() if "attnsim " in lesson(n)])
def test_every_command_a_lesson_suggests_runs(name, capsys):
    if name in MODEL_BUILTINS:
        pytest.importorskip("safetensors")
        pytest.importorskip("tokenizers")
    for m in COMMAND.finditer(lesson(name)):
        argv = shlex.split(m.group(1).rstrip(". "))
        assert main(argv) == 0, (name, argv, capsys.readouterr().err)
        assert capsys.readouterr().out.strip()


def test_kv_cache_lesson_check_holds():
    """t4.h0.weights is row "it" of gpt_causal's h0.weights, as its lesson says."""
    cached, whole = tracer.run("kv_cache"), tracer.run("gpt_causal", "by-hand")
    np.testing.assert_allclose(cached.rows("t4.h0.weights")[0], whole.rows("h0.weights")[4, :5], rtol=1e-12)


def test_the_scaling_why_names_no_other_scenario_s_numbers():
    trace = tracer.run("rope", "exact")   # d_k = 4: no ÷√3, no ⌊x/2⌋
    for step in trace.steps:
        assert "√3" not in step.why and "x/2" not in step.why, (step.id, step.why)


@pytest.mark.parametrize("name", ["by_hand", "toy_dk4", "induction"])
def test_show_leaves_out_the_tuis_key_hints(name, capsys):
    if name in MODEL_BUILTINS:
        pytest.importorskip("safetensors")
        pytest.importorskip("tokenizers")
    assert main(["show", name, "--step", "h0.weights"]) == 0
    out = capsys.readouterr().out
    assert not re.search(r"\b[Pp]ress\b", out), out[:2000]
