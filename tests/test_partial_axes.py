"""Steps that hold part of an axis (a decoded token's one row, a key block's keys) are labelled with
their own tokens only: the lines figure of decoded steps crashed (labels for every token, lines for
the step's), and the Markdown worksheet's tables had headers wider than their rows."""
from __future__ import annotations

import re

import tracer
from tracer.labels import step_labels
from tui.cli import main


def test_each_step_has_as_many_labels_as_rows_and_columns():
    for name in ("kv_cache", "flash"):
        trace = tracer.run(name)
        for step in trace.steps:
            rows, cols = step_labels(trace, step)
            assert (len(rows), len(cols)) == step.shape, (name, step.id, len(rows), len(cols), step.shape)
    trace = tracer.run("kv_cache")
    assert step_labels(trace, trace.step("t4.h0.weights")) == (["it"], ["the", "cat", "sat", "and", "it"])


def test_the_lines_of_decoded_steps_are_drawn(tmp_path, capsys):
    out = tmp_path / "decoded.svg"
    assert main(["export", "kv_cache", "--figure", "lines", "--step", "t4.h0.weights", "--step", "t5.h0.weights",
                 "-o", str(out)]) == 0
    svg = out.read_text(encoding="utf-8")
    assert 'id="t4.h0.weights"' in svg and 'id="t5.h0.weights"' in svg


def test_every_markdown_table_is_as_wide_as_its_header(tmp_path, capsys):
    for name in ("kv_cache", "flash"):
        out = tmp_path / f"{name}.md"
        assert main(["export", name, "-o", str(out)]) == 0
        table = []
        for line in out.read_text(encoding="utf-8").splitlines() + [""]:
            if line.startswith("|"):
                table.append(line.count("|"))
            elif table:
                assert len(set(table)) == 1, (name, table)
                table = []
