"""Issue 23, items 1, 3, 7, 13, 14: a grouped head shows and names the group it reads (panels,
worksheet, pictures, exports), the pipeline lists only that group, the cross-attention key axis is
named from the context's tokens (no crash on the fourth key), repeated tokens are told apart, and
`c` on one head says so. Expected matrices are read from the scenario files here, not the trace."""
import csv
import io
import tomllib
from pathlib import Path

import numpy as np
import pytest

import tracer
from tui.cli import main
from tui.widgets.matrix import MatrixView
from tui.widgets.steps import StepList

from tui_helpers import go_to, opened, pilot_test, screen_text, settle, status_text

SCENARIOS = Path(tracer.scenario.scenarios_dir())


def file_weights(name: str) -> dict:
    return tomllib.loads((SCENARIOS / f"{name}.toml").read_text())["weights"]


def panel(app, prefix: str) -> MatrixView:
    views = [v for v in app.screen.query(MatrixView) if v.display and v.border_title.startswith(prefix)]
    assert len(views) == 1, [v.border_title for v in app.screen.query(MatrixView)]
    return views[0]


@pytest.mark.parametrize("head, group", [(2, 1), (3, 1), (1, 0)])
@pilot_test
async def test_a_grouped_heads_panels_show_the_group_it_reads(head, group):
    k = np.array(file_weights("gqa")["k"][group], dtype=float)   # rows layout: d_model × d_k
    v = np.array(file_weights("gqa")["v"][group], dtype=float)
    async with opened("gqa", size=(140, 45)) as (app, pilot):
        for _ in range(head):
            await pilot.press("]")
            await settle(pilot)
        assert app.screen.head == head
        listed = app.screen.query_one(StepList).ids               # the pipeline: this group's only
        assert f"kv{group}.k" in listed and f"kv{1 - group}.k" not in listed and f"kv{1 - group}.v" not in listed
        for kind, want in (("k", k), ("v", v)):
            await go_to(pilot, f"kv{group}.{kind}")
            view = panel(app, f"W_{kind.upper()}")
            assert np.array_equal(view.array, want)
            assert f"group {group}" in view.border_title


@pilot_test
async def test_head_switch_on_a_group_step_goes_to_the_new_heads_group():
    async with opened("gqa", size=(140, 45)) as (app, pilot):
        await pilot.press("]", "]")
        await settle(pilot)
        await go_to(pilot, "kv1.k")
        await pilot.press("[", "[")
        await settle(pilot)
        assert (app.screen.head, app.screen.step_id) == (0, "kv0.k")
        await pilot.press("n")                                  # stepping on never fails
        await settle(pilot)
        assert app.is_running


@pytest.mark.parametrize("name, head", [("gqa", 1), ("gqa", 2), ("gqa", 3), ("mqa", 1), ("mqa", 2)])
def test_worksheet_pictures_of_every_grouped_head(tmp_path, name, head, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "w.svg"
    assert main(["export", name, "--figure", "worksheet", "--step", f"h{head}.weights", "-o", str(out)]) == 0
    groups = len(file_weights(name)["k"])
    group = head // (len(file_weights(name)["q"]) // groups)
    assert f"W_K (group {group}" in out.read_text() or groups == len(file_weights(name)["q"])


def test_trace_weight_maps_a_head_to_its_group():
    trace = tracer.run("gqa")
    for head, group in ((0, 0), (1, 0), (2, 1), (3, 1)):
        assert np.array_equal(trace.weight("k", head), np.array(file_weights("gqa")["k"][group], dtype=float))
        assert np.array_equal(trace.weight("q", head), np.array(file_weights("gqa")["q"][head], dtype=float))
    assert trace.weight_name("k", 3) == "W_K (group 1, read by heads 2 and 3)"
    columns = tracer.run("gqa", layout="columns")
    assert np.array_equal(columns.weight("v", 2), np.array(file_weights("gqa")["v"][1], dtype=float).T)


@pilot_test
async def test_cross_attention_cursor_reaches_every_key_named_from_the_context():
    context = tomllib.loads((SCENARIOS / "cross_attention.toml").read_text())["context_tokens"]
    async with opened("cross_attention", size=(120, 40)) as (app, pilot):
        for sid, keys, move in (("h0.scores", range(len(context)), "right"),
                                ("h0.weights", range(len(context) - 1, -1, -1), "left")):
            await go_to(pilot, sid)
            for n, j in enumerate(keys):
                if n:
                    await pilot.press(move)
                    await settle(pilot)
                assert app.is_running and app.screen.cell == (0, j)
                assert f"key {context[j]}" in screen_text(app)


def test_repeated_tokens_carry_their_index_in_tables_and_exports(tmp_path, capsys):
    tokens = tomllib.loads((SCENARIOS / "rope.toml").read_text())["tokens"]
    assert len(set(tokens)) < len(tokens)
    names = [f"{t}#{i}" if tokens.count(t) > 1 else t for i, t in enumerate(tokens)]
    assert main(["show", "rope", "--step", "h0.weights"]) == 0
    printed = capsys.readouterr().out
    assert all(name in printed for name in names)
    out = tmp_path / "r.csv"
    assert main(["export", "rope", "-o", str(out), "--step", "h0.weights"]) == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert {r["row_label"] for r in rows if r["step"] == "h0.weights"} == set(names)
    assert {r["col_label"] for r in rows if r["step"] == "h0.weights"} == set(names)
    md = tmp_path / "r.md"
    assert main(["export", "rope", "-o", str(md), "--step", "h0.weights"]) == 0
    assert all(f"| **{name}** |" in md.read_text() for name in names)
    pytest.importorskip("matplotlib")
    svg = tmp_path / "r.svg"
    assert main(["export", "rope", "--figure", "heatmap", "--step", "h0.weights", "-o", str(svg)]) == 0
    assert all(f">{name}<" in svg.read_text() for name in names)   # both axes' tick labels


@pilot_test
async def test_repeated_tokens_in_the_tui_axes_and_cell_line():
    async with opened("rope", size=(140, 45)) as (app, pilot):
        await go_to(pilot, "h0.weights")
        await pilot.press("down")
        await settle(pilot)
        text = screen_text(app)
        assert "la#1" in text and "la#4" in text


@pilot_test
async def test_c_on_one_head_says_there_is_one_head():
    async with opened("by_hand", size=(120, 36)) as (app, pilot):
        await pilot.press("c")
        await settle(pilot)
        assert not app.screen.compare
        notes = " ".join(str(n.message) for n in app._notifications)
        assert "one head" in notes
