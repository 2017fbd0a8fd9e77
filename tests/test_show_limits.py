"""`attnsim show` at sizes that would flood a terminal or memory: what export refuses as text is
refused with its size, what is allowed is printed line by line, and labels are cut to a width."""
from __future__ import annotations

import tracemalloc

import pytest

import tracer
from tracer.export import TEXT_CELLS
from tui.cli import main
from tui.tables import MAX_LABEL, step_lines, step_table

RANDOM = "[random]\nseed = 1\ntokens = {n}\nd_model = 4\nheads = 1\nd_k = 2\n"


def test_full_of_more_cells_than_a_text_export_is_refused_with_its_size(capsys, tmp_path):
    path = tmp_path / "wide.toml"
    n = int((TEXT_CELLS["csv"] / 4) ** 0.5) + 64   # four n × n steps: over the limit, a lazy trace
    path.write_text(RANDOM.format(n=n))
    assert main(["show", str(path), "--full"]) == 2
    out, err = capsys.readouterr()
    errors = [line for line in err.splitlines() if line.startswith("attnsim: error: ")]  # after a notice or two
    assert out == "" and len(errors) == 1 and err.endswith(errors[0] + "\n") and "Traceback" not in err
    assert errors[0].startswith("attnsim: error: --full: printing ") and "GiB of text" in err and "--step" in err


def test_gpt3_layer_full_is_refused_as_its_export_is(capsys):
    assert main(["show", "gpt3_layer", "--full"]) == 2
    assert main(["export", "gpt3_layer", "-o", "never.csv"]) == 2
    err = capsys.readouterr().err
    assert "--full: printing" in err and "more than a text format should hold" in err


def test_what_is_allowed_is_printed_line_by_line(tmp_path):
    trace = tracer.run(tracer.from_arrays(x=[[float(i % 7), 1.0] for i in range(600)], q=[[1.0], [0.5]],
                                          k=[[1.0], [0.25]], v=[[1.0], [1.0]]))
    step = trace.step("h0.scores")
    text = step_table(trace, step, fractions=False, full=True)
    assert len(text) > 2_000_000 and text.count("\n") == 601
    tracemalloc.start()
    for line in step_lines(trace, step, fractions=False, full=True):
        assert len(line) < 6000   # a terminal takes each line away as it comes
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < len(text) / 4, peak


@pytest.mark.parametrize("label", ["w" * 1_000_000, "é" * 5000, "a b " * 400])
def test_a_huge_label_is_cut_to_a_width(capsys, tmp_path, label):
    path = tmp_path / "long_label.toml"
    path.write_text(f'tokens = ["{label}", "b"]\nfeatures = ["{label}", "f"]\nx = [[1, 0], [0, 1]]\n'
                    "[weights]\nq = [[1], [0]]\nk = [[1], [1]]\nv = [[1], [2]]\n", encoding="utf-8")
    assert main(["show", str(path), "--full"]) == 0
    out = capsys.readouterr().out
    assert len(out) < 20_000
    assert max(len(line) for line in out.splitlines()) < 200
    assert label[:MAX_LABEL - 3] + "…#0" in out   # cut, and still named: token 0, feature 0


@pytest.mark.parametrize("extra", ['mask = "causal"', 'arithmetic = "by-hand"', 'mask = "sliding:3"\n[defaults]\nscale = "none"'])
def test_a_generated_layer_is_sized_before_it_is_drawn(tmp_path, extra):
    """The early count of a [random] file's cells (no array drawn) is the trace's own."""
    import argparse
    from tui.output_verbs import _drawn_cells
    path = tmp_path / "r.toml"
    path.write_text(f'{extra.split(chr(10))[0]}\n[random]\ntokens = 9\nd_model = 6\nheads = 3\nd_k = 2\nd_v = 4\n'
                    + "\n".join(extra.split("\n")[1:]), encoding="utf-8")
    args = argparse.Namespace(model=None, step=[], scenario=str(path), text=None, layer=None, set=[], arithmetic=None)
    trace = tracer.run(str(path))
    assert _drawn_cells(args) == sum(s.shape[0] * s.shape[1] for s in trace.steps)
