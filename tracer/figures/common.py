"""What every figure shares: matplotlib loaded only when a picture is asked for, numbers written
as the TUI writes them, axis labels, and one deterministic, atomic save to SVG or PNG."""
from __future__ import annotations

import math

from ..errors import ScenarioError
from ..labels import LABEL_WIDTH, axis_labels, short, step_labels
from ..writing import atomic_path
from ..printing import fractions_for, table_writer, tolerance

PICTURES = ("svg", "png")
DPI = 200  # PNG: sharp on a projected slide, a few hundred kB at most
RC = {"svg.fonttype": "none",      # text stays text: searchable, editable
      "svg.hashsalt": "attnsim",   # element ids the same from run to run
      "text.parse_math": False,    # a token such as "$5" is text, not mathtext
      "font.family": "DejaVu Sans", "font.size": 9, "axes.titlesize": 10}
SEQUENTIAL = frozenset({"weights", "exp", "sums", "sink"})   # kinds never negative: one ramp from 0
GIVEN = "#e8eef7"    # background of the cells a worksheet gives (input, weights)
MASKED = "#d9d9d9"   # a −∞ cell


def matplotlib():
    """The matplotlib package, or one line saying how to install it."""
    try:
        import matplotlib as mpl
        import matplotlib.figure  # noqa: F401  (no pyplot: no global state, no GUI backend)
    except ImportError:
        raise ScenarioError("pictures", "matplotlib is not installed; expected it: "
                            "pip install 'attnsim[pictures]'") from None
    return mpl


def number_writer(trace, array):
    """The cells' texts of one table as the TUI writes them: fractions only where the arithmetic
    keeps numbers rational, one printing per number."""
    return table_writer(array, fractions_for(trace), tolerance(trace.dtype))


TITLE_WIDTH = 120   # characters of a scenario's title in a caption


def labels(trace, axis: str, size: int) -> list[str]:
    """Token names on token/query/key axes, Σ on a sums axis, indices elsewhere; each cut to
    LABEL_WIDTH characters (a picture's size, and its memory, grow with its longest label)."""
    return axis_labels(trace, axis, size, width=LABEL_WIDTH)


def step_names(trace, step) -> tuple[list[str], list[str]]:
    """A step's row and column labels as its tables write them (θ, max, sink on a one-wide axis),
    each cut to LABEL_WIDTH characters."""
    return step_labels(trace, step, LABEL_WIDTH)


def caption(trace, title: bool = True) -> str:
    """The line naming what was computed: scenario (and its title), arithmetic and layout."""
    sc = trace.scenario
    name = f"{sc.name}: {short(sc.title, width=TITLE_WIDTH)}" if title and sc.title else sc.name
    return f"{name}  ·  arithmetic: {trace.arithmetic.preset}  ·  layout: {trace.layout}"


def ink_for(rgba) -> str:
    """Black or white text, whichever reads better on a cell of this colour."""
    r, g, b = rgba[:3]
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.45 else "white"


def finite_extent(a) -> tuple[float, float]:
    """The smallest and largest finite values (0, 0 when none is finite)."""
    import numpy as np
    ok = a[np.isfinite(a)]
    return (float(ok.min()), float(ok.max())) if ok.size else (0.0, 0.0)


def text_width(text: str, size: float, bold: bool = False) -> float:
    """Inches the longest line of `text` takes at `size` points in the house font, measured from
    the glyphs (no renderer needed): what a layout must leave room for, so that nothing is cut."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextPath
    font = FontProperties(family=RC["font.family"], weight="bold" if bold else "normal")
    widths = [TextPath((0, 0), line, size=size, prop=font).get_extents().width for line in text.splitlines() if line]
    return max(widths, default=0.0) / 72


def tick_step(count: int, most: int) -> int:
    """Every how many labels to write so that at most `most` of them appear."""
    return max(1, math.ceil(count / most))


def svg_text(build) -> str:
    """The figure `build(Figure)` makes, as SVG text in memory (for a notebook: no file)."""
    import io
    mpl = matplotlib()
    from matplotlib.figure import Figure
    out = io.StringIO()
    with mpl.rc_context(RC):
        build(Figure).savefig(out, format="svg", metadata={"Date": None}, facecolor="white")
    return out.getvalue()


def render(build, path, fmt_name: str):
    """Builds a figure with `build(Figure)` under the house style and writes it atomically."""
    mpl = matplotlib()
    from matplotlib.figure import Figure
    metadata = {"Date": None} if fmt_name == "svg" else {"Software": None}
    with atomic_path(path) as tmp, mpl.rc_context(RC):  # the path is checked before any drawing
        fig = build(Figure)
        fig.savefig(tmp, format=fmt_name, dpi=DPI, metadata=metadata, facecolor="white")
    return fig
