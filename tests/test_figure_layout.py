"""Nothing a picture writes is cut at its edges (measured by matplotlib's own renderer, not by the
layout's estimate), a worksheet too wide for a sheet wraps, and the README's hero figure is the
one attnsim draws today."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import tracer

mpl = pytest.importorskip("matplotlib")
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from tracer.figures import heatmap, worksheet  # noqa: E402
from tracer.figures.common import RC  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HERO = ROOT / "tracer" / "figures" / "by_hand.svg"


def cut_texts(fig) -> list[str]:
    """What a drawn figure puts past its edges, by matplotlib's own measure of everything drawn
    (its tight box, in inches; a hundredth of slack for antialiasing)."""
    box = fig.get_tightbbox(FigureCanvasAgg(fig).get_renderer())
    width, height = fig.get_size_inches()
    edges = {"left": -box.x0, "right": box.x1 - width, "bottom": -box.y0, "top": box.y1 - height}
    return [f"{side} by {over:.2f} in" for side, over in edges.items() if over > 0.01]


def drawn(build):
    with mpl.rc_context(RC):
        fig = build(Figure)
        return fig, cut_texts(fig)


@pytest.mark.parametrize("name,steps", [
    ("by_hand", ["h0.weights"]), ("by_hand", ["x"]), ("multi_head", ["h1.weights", "concat", "out"]),
    ("residual_norm", ["norm"]), ("flash", ["h0.blk1.rescale"]), ("rope", ["h0.q_rot"])])
def test_no_heatmap_text_is_cut(name, steps):
    trace = tracer.run(name)
    _, cut = drawn(lambda F: heatmap.draw(trace, [trace.step(s) for s in steps], F))
    assert cut == []


@pytest.mark.parametrize("name", ["by_hand", "gqa", "multi_head", "bank_river", "low_rank"])
def test_no_worksheet_text_is_cut_and_a_wide_one_wraps(name):
    trace = tracer.run(name)
    fig, cut = drawn(lambda F: worksheet.draw(trace, 0, False, F))
    assert cut == []
    width, height = fig.get_size_inches()
    assert width <= 16, (name, width, height)   # gqa was one 34-inch strip


def svg_texts(path: Path) -> list[str]:
    ns = "{http://www.w3.org/2000/svg}"
    return [re.sub(r"\s+", " ", "".join(node.itertext())).strip() for node in ET.parse(path).iter(f"{ns}text")]


def test_the_readme_hero_figure_is_todays_drawing(tmp_path):
    fresh = tmp_path / "by_hand.svg"
    tracer.figure(tracer.run("by_hand"), fresh, ["h0.weights"])
    assert svg_texts(HERO) == svg_texts(fresh)
    size = lambda p: re.search(r'width="([\d.]+)pt" height="([\d.]+)pt"', p.read_text()).groups()  # noqa: E731
    assert size(HERO) == size(fresh)
