"""Hostile but valid labels (tests/bad_inputs/accepted/): tokens, a feature and a title of 10 000
characters. A picture, the notebook's HTML and a cell's story stay the size of a short label's
(a picture used to grow with the square of the label: 1 000 characters took 0.9 GB), and a cut
label still names its token: `wwwwwwwwwwwwwwwwwwwww…#1`."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import tracer
from tracer.figures import figure_svg
from tui.cli import main

pytest.importorskip("matplotlib", reason="pictures need matplotlib (the test extra installs it)")

ACCEPTED = Path(__file__).parent / "bad_inputs" / "accepted"
LONG = ACCEPTED / "labels_of_10000_characters.toml"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """The 10 000-character scenario, and the same with labels of 200 characters (the yardstick:
    cut, they read as the long ones do)."""
    short = tmp_path_factory.mktemp("short") / "labels_of_10000_characters.toml"   # the same name
    text = LONG.read_text(encoding="utf-8")
    short.write_text(re.sub(r'"([wT])\1{200,}(\w?)"', lambda m: f'"{m.group(1) * 200}{m.group(2)}"', text),
                     encoding="utf-8")
    return tracer.run(str(LONG)), tracer.run(str(short))


def svg_size(text: str) -> tuple[float, float]:
    root = ET.fromstring(text)
    return tuple(float(root.get(k).removesuffix("pt")) for k in ("width", "height"))


def svg_labels(text: str) -> list[str]:
    return ["".join(node.itertext()) for node in ET.fromstring(text).iter(f"{SVG}text")]


@pytest.mark.parametrize("kind", ["heatmap", "worksheet", "lines"])
def test_a_picture_is_as_big_as_with_short_labels_and_names_each_token(traces, kind):
    long, short = traces
    steps = ["x", "h0.weights", "h0.sums"] if kind == "heatmap" else None
    big, small = (figure_svg(t, steps, kind) for t in (long, short))
    assert svg_size(big) == svg_size(small) and svg_size(big) < (20 * 72, 20 * 72)   # inches, not 700
    assert len(big) == len(small) < 200_000
    labels = svg_labels(big)
    assert max(map(len, labels)) < 200
    # the two tokens that differ only in their last character stay apart: their index ends the label
    assert any(t.endswith("…#0") for t in labels) and any(t.endswith("…#1") for t in labels)
    assert "c" in labels


def test_show_in_a_notebook_is_bounded_too(traces):
    long, short = traces
    assert len(long.show("h0.weights").svg) == len(short.show("h0.weights").svg) < 100_000


def test_the_notebook_html_does_not_repeat_a_label_in_every_cell(traces):
    long, short = traces
    page, yardstick = long._repr_html_(), short._repr_html_()
    # every cell's story names its tokens and features cut short, as the headers and the title are
    drop_ids = lambda html: re.sub(r"attnsim-\d+", "", html)  # noqa: E731
    assert len(drop_ids(page)) == len(drop_ids(yardstick)) < 100_000
    assert "w" * 100 not in page
    assert "…#1" in page


def test_a_cells_story_names_the_tokens_cut_short(traces):
    long, _ = traces
    story = long.explain("h0.weights", 0, 1)
    assert len(story) < 300
    assert re.search(r"query w+…#0, key w+…#1\]", story), story


@pytest.mark.parametrize("name", sorted(p.name for p in ACCEPTED.glob("*.toml")))
@pytest.mark.parametrize("fmt", ["svg", "png", "md", "csv", "json"])
def test_every_accepted_hostile_file_exports(tmp_path, capsys, name, fmt):
    target = tmp_path / f"out.{fmt}"
    assert main(["export", str(ACCEPTED / name), "-o", str(target)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("wrote ") and len(out) < 1000 and err == ""
    limit = {"png": 1_000_000, "svg": 200_000}.get(fmt, 2_000_000)   # the text formats hold the labels whole
    assert 0 < target.stat().st_size < limit
