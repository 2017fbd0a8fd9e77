"""Pictures (SVG, PNG): the SVG is parsed and every number, label and title is found as text in
its place, against values computed here by hand (Fractions, NumPy); PNGs are read back; bad input
leaves no file."""
import math
import re
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracer
from tui.cli import main

pytest.importorskip("matplotlib", reason="pictures need matplotlib (the test extra installs it)")

SVG = "{http://www.w3.org/2000/svg}"
ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- independent references
def by_hand_weights(sc, head=0) -> list[list[Fraction]]:
    """The classroom arithmetic in Fractions (query × key): S = Q·Kᵀ, ⌊S/2⌋, 3^s, ÷ each query's sum."""
    x = [[Fraction(int(v)) for v in row] for row in sc.x]
    def project(w):
        return [[sum(xi[m] * Fraction(int(w[m][j])) for m in range(len(xi))) for j in range(len(w[0]))] for xi in x]
    q, k = project(sc.w_q[head]), project(sc.w_k[head])
    scores = [[sum(a * b for a, b in zip(qi, kj)) for kj in k] for qi in q]
    powers = [[Fraction(3) ** math.floor(s / 2) for s in row] for row in scores]
    return [[p / sum(row) for p in row] for row in powers]


def written(f: Fraction) -> str:
    """How a person writes an exact number: 3, 27/46, 3/4 (a fraction, never 0.75 beside 27/46)."""
    if f.denominator == 1:
        text = str(f.numerator)
    elif f.denominator <= 10 ** 6:   # by-hand's 6561/7381 too: a sheet's fractions, however large
        text = f"{f.numerator}/{f.denominator}"
    else:  # four significant digits; a rounded one keeps its trailing zeros (1.000 is not 1)
        short = f"{float(f):.4g}"
        text = short if Fraction(short) == f else f"{float(f):#.4g}".replace(".e", "e").rstrip(".")
    return text.replace("-", "−")


def softmax_rows(s):
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# ---------------------------------------------------------------- reading the files
def texts(path) -> list[tuple[str, float, float, str]]:
    """Every <text> of an SVG: (content, x, y, text-anchor); y of a title line from its translate()."""
    out = []
    for node in ET.parse(path).iter(f"{SVG}text"):
        content = "".join(node.itertext())
        style = node.get("style", "")
        anchor = re.search(r"text-anchor: (\w+)", style)
        if node.get("x") is not None:
            x, y = float(node.get("x")), float(node.get("y"))
        else:
            x, y = map(float, re.search(r"translate\(([-\d.]+) ([-\d.]+)\)", node.get("transform")).groups())
        out.append((content, x, y, anchor.group(1) if anchor else "start"))
    return out


def cell_texts(path, tokens) -> dict[tuple[str, str], str]:
    """{(row label, column label): text in that cell}, found by position: a cell's number sits
    straight below its column's label and level with its row's label."""
    found = texts(path)
    cols = {t: x for t, x, _, anchor in found if t in tokens and anchor == "middle"}
    rows = {t: y for t, _, y, anchor in found if t in tokens and anchor == "end"}
    cells = {}
    for content, x, y, anchor in found:
        if anchor != "middle" or content in tokens:
            continue
        col = [c for c, cx in cols.items() if abs(cx - x) < 0.5]
        row = [r for r, ry in rows.items() if abs(ry - y) < 3]
        if col and row:
            cells[row[0], col[0]] = content
    return cells


def png_info(path) -> tuple[int, int, float]:
    """(width, height, dots per inch) from the PNG's own header chunks."""
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    at = data.index(b"pHYs")
    per_metre = struct.unpack(">I", data[at + 4:at + 8])[0]
    return width, height, per_metre * 0.0254


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- heatmaps
@pytest.mark.parametrize("layout", ["columns", "rows"])
def test_by_hand_weights_are_the_classroom_fractions_in_their_cells(tmp_path, layout):
    trace = tracer.run("by_hand", "by-hand", layout=layout)
    path = tracer.figure(trace, tmp_path / "w.svg", steps=["h0.weights"])
    tokens = trace.scenario.tokens
    cells = cell_texts(path, tokens)
    ref = by_hand_weights(trace.scenario)
    for i, q in enumerate(tokens):
        for j, k in enumerate(tokens):
            where = (k, q) if layout == "columns" else (q, k)  # columns: one row per key
            assert cells[where] == written(ref[i][j]), (where, layout)
    assert cells[("x2", "x1") if layout == "columns" else ("x1", "x2")] == "27/46"
    contents = [t for t, *_ in texts(path)]
    step = trace.step("h0.weights")
    assert f"h0.weights: {step.title}" in contents and step.formula in contents
    assert "query" in contents and "key" in contents


def test_exact_arithmetic_writes_decimals_from_numpys_softmax(tmp_path):
    trace = tracer.run("by_hand", "exact", layout="rows")
    path = tracer.figure(trace, tmp_path / "w.svg", steps=["h0.weights"])
    sc = trace.scenario
    q, k = sc.x @ sc.w_q[0], sc.x @ sc.w_k[0]
    ref = softmax_rows(q @ k.T / np.sqrt(3))
    cells = cell_texts(path, sc.tokens)
    for i, a in enumerate(sc.tokens):
        for j, b in enumerate(sc.tokens):
            assert float(cells[a, b]) == pytest.approx(ref[i, j], rel=5e-4)
            assert "/" not in cells[a, b]


def test_masked_cells_read_minus_infinity_on_a_diverging_scale(tmp_path):
    trace = tracer.run("gpt_causal")
    path = tracer.figure(trace, tmp_path / "m.svg", steps=["h0.masked"])
    n = trace.scenario.n
    contents = [t for t, *_ in texts(path)]
    assert Counter(contents)["−∞"] == n * (n - 1) // 2
    assert all(token in contents for token in trace.scenario.tokens)
    ticks = [float(t.replace("−", "-")) for t, _, _, anchor in texts(path)
             if anchor == "start" and re.fullmatch(r"−?\d+(\.\d+)?", t)]  # the colour bar's
    assert min(ticks) == -max(ticks) != 0  # centred on 0


def test_large_matrices_keep_labels_drop_numbers_and_say_so(tmp_path):
    (tmp_path / "wide.toml").write_text("[random]\nseed = 3\ntokens = 40\nd_model = 8\nheads = 1\nd_k = 4\n")
    trace = tracer.run(str(tmp_path / "wide.toml"))
    path = tracer.figure(trace, tmp_path / "big.svg", steps=["h0.weights"])
    contents = [t for t, *_ in texts(path)]
    assert sum(t in trace.scenario.tokens for t in contents) == 2 * 40  # both axes, every token
    assert any("40 × 40 cells: colours only" in t for t in contents)
    assert len(contents) < 150  # no 1600 numbers


def test_svg_keeps_text_as_text_and_is_the_same_every_run(tmp_path):
    trace = tracer.run("by_hand")
    a = tracer.figure(trace, tmp_path / "a.svg", steps=["h0.weights", "h0.sums"])
    b = tracer.figure(trace, tmp_path / "b.svg", steps=["h0.weights", "h0.sums"])
    assert a.read_bytes() == b.read_bytes()
    svg = a.read_text()
    assert "DejaVuSans-" not in svg  # no glyph outlines: the words are <text>
    assert {"46/3", "28/3", "22/3", "12"} <= {t for t, *_ in texts(a)}


@given(st.integers(0, 2**32 - 1), st.sampled_from(["rows", "columns"]))
@settings(max_examples=12)
def test_any_small_integer_scenario_heatmap_matches_fractions(tmp_path_factory, seed, layout):
    rng = np.random.default_rng(seed)
    n, d = 3, 4
    x = rng.integers(-1, 2, (n, d)).astype(float)
    wq, wk = rng.integers(-1, 2, (d, d)).astype(float), rng.integers(-1, 2, (d, d)).astype(float)
    sc = tracer.from_arrays(x, wq, wk, wq, tokens=["a", "b", "c"], arithmetic="by-hand")
    trace = tracer.run(sc, "by-hand", layout=layout)  # ⌊s ÷ round(√4)⌋ = ⌊s ÷ 2⌋
    path = tracer.figure(trace, tmp_path_factory.mktemp("h") / "w.svg", steps=["h0.weights"])
    s = [[sum(Fraction(int(p)) * Fraction(int(r)) for p, r in zip(qi, kj)) for kj in x @ wk] for qi in x @ wq]
    powers = [[Fraction(3) ** math.floor(v / 2) for v in row] for row in s]
    cells = cell_texts(path, sc.tokens)
    for i, a in enumerate(sc.tokens):
        for j, b in enumerate(sc.tokens):
            want = written(powers[i][j] / sum(powers[i]))
            assert cells[(b, a) if layout == "columns" else (a, b)] == want


# ---------------------------------------------------------------- worksheet and lines
@pytest.mark.parametrize("layout", ["columns", "rows"])
def test_worksheet_holds_the_whole_head_and_blank_keeps_only_the_givens(tmp_path, layout):
    trace = tracer.run("by_hand", "by-hand", layout=layout)
    sc = trace.scenario
    full = Counter(t for t, *_ in texts(tracer.figure(trace, tmp_path / "f.svg", kind="worksheet")))
    blank = Counter(t for t, *_ in texts(tracer.figure(trace, tmp_path / "b.svg", kind="worksheet", blank=True)))
    weights = Counter(written(f) for row in by_hand_weights(sc) for f in row)
    assert all(full[t] >= c for t, c in weights.items())
    for sid in ("h0.q", "h0.k", "h0.v", "h0.scores", "h0.z"):
        assert trace.step(sid).formula in full
    given = Counter(str(int(v)).replace("-", "−") for m in (sc.x, sc.w_q[0], sc.w_k[0], sc.w_v[0]) for v in m.ravel())
    numbers = Counter({t: c for t, c in blank.items() if re.fullmatch(r"−?\d+(/\d+)?|−?\d*\.\d+", t)})
    assert numbers == given  # only the input and the weight matrices are written
    assert "27/46" in full and "27/46" not in blank


@pytest.mark.parametrize("layout", ["columns", "rows"])
def test_lines_opacity_is_each_weight(tmp_path, layout):
    trace = tracer.run("multi_head", layout=layout)
    sc = trace.scenario
    path = tracer.figure(trace, tmp_path / "l.svg", kind="lines")
    groups = {g.get("id"): g for g in ET.parse(path).iter(f"{SVG}g") if g.get("id", "").endswith("weights")}
    colours = set()
    for h in range(sc.heads):
        q, k = sc.x @ sc.w_q[h], sc.x @ sc.w_k[h]
        ref = softmax_rows(q @ k.T / np.sqrt(sc.d_k))
        styles = [p.get("style") for p in groups[f"h{h}.weights"].iter(f"{SVG}path")]
        opacity = [float(re.search(r"stroke-opacity: ([\d.]+)", s).group(1)) if "stroke-opacity" in s else 1.0
                   for s in styles]
        np.testing.assert_allclose(np.reshape(opacity, (sc.n, sc.n)), ref, atol=2e-6)
        colours |= {re.search(r"stroke: (#\w+)", s).group(1) for s in styles}
    assert len(colours) == sc.heads  # one colour a head
    contents = {t for t, *_ in texts(path)}
    assert set(sc.tokens) <= contents and {"query", "key"} <= contents


def test_lines_draw_each_head_in_a_panel_of_its_own(tmp_path):
    """ALiBi's heads join the same pairs of tokens: drawn over one another, head 1 hid head 0."""
    trace = tracer.run("alibi")
    path = tracer.figure(trace, tmp_path / "l.svg", kind="lines")
    spans = {}
    for g in ET.parse(path).iter(f"{SVG}g"):
        if g.get("id", "").endswith("weights"):
            xs = [float(v) for p in g.iter(f"{SVG}path") for v in re.findall(r"[ML] ([-\d.]+) ", p.get("d"))]
            spans[g.get("id")] = (min(xs), max(xs))
    assert sorted(spans) == ["h0.weights", "h1.weights"]
    (a0, a1), (b0, b1) = spans["h0.weights"], spans["h1.weights"]
    assert a1 < b0   # side by side, not one over the other
    # each panel's own token columns: five names left and right of each
    found = texts(path)
    for lo, hi in ((a0, a1), (b0, b1)):
        assert sum(1 for t, x, _, anchor in found if t.startswith("la#") and anchor == "end" and x < lo) >= 5
        assert sum(1 for t, x, _, anchor in found if t.startswith("la#") and anchor == "start" and x > hi) >= 5


@pytest.mark.parametrize("kind", ["heatmap", "worksheet", "lines"])
@pytest.mark.parametrize("layout", ["columns", "rows"])
def test_png_is_slide_sized_and_not_blank(tmp_path, kind, layout):
    import matplotlib.image
    trace = tracer.run("by_hand", layout=layout)
    path = tracer.figure(trace, tmp_path / "p.png", kind=kind)
    width, height, dpi = png_info(path)
    assert round(dpi) == 200 and width >= 600 and height >= 400
    pixels = matplotlib.image.imread(path)
    assert pixels.shape[:2] == (height, width)
    assert pixels[..., :3].std() > 0.05  # something is drawn on the white


# ---------------------------------------------------------------- the command line
def test_cli_writes_and_says_what(tmp_path, capsys):
    target = tmp_path / "w.svg"
    code, out, err = cli(capsys, "export", "by_hand", "-o", str(target), "--step", "h0.weights")
    assert code == 0 and out.strip() == f"wrote {target}: heatmap of h0.weights"
    assert "27/46" in {t for t, *_ in texts(target)}
    code, out, _ = cli(capsys, "export", "by_hand", "-o", str(tmp_path / "s.png"), "--figure", "worksheet", "--blank")
    assert code == 0 and "worksheet of head 0" in out and png_info(tmp_path / "s.png")[2] > 199


@pytest.mark.parametrize("argv, field", [
    (["--step", "nope"], "--step"),
    (["--figure", "pie"], "--figure"),
    (["--figure", "lines", "--step", "h0.scores"], "--step"),
    (["--format", "gif"], "--format"),
])
def test_cli_bad_input_is_one_line_exit_2_and_no_file(tmp_path, capsys, argv, field):
    target = tmp_path / "out.svg"
    code, out, err = cli(capsys, "export", "by_hand", "-o", str(target), *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and f"error: {field}:" in err
    assert list(tmp_path.iterdir()) == []


def test_cli_unwritable_paths_and_figures_without_a_picture_format(tmp_path, capsys):
    (tmp_path / "file").write_text("old")
    for target, argv in ((tmp_path / "file" / "x.svg", []), (tmp_path / "missing" / "x.png", []),
                         (tmp_path / "x.json", ["--figure", "lines"])):
        code, out, err = cli(capsys, "export", "by_hand", "-o", str(target), *argv)
        assert code == 2 and out == "" and err.count("\n") == 1 and not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_too_large_for_a_worksheet_or_lines_is_refused(tmp_path, capsys):
    (tmp_path / "big.toml").write_text("[random]\nseed = 1\ntokens = 80\nd_model = 8\nheads = 1\nd_k = 4\n")
    for kind in ("worksheet", "lines"):
        code, out, err = cli(capsys, "export", str(tmp_path / "big.toml"), "-o", str(tmp_path / "x.svg"),
                             "--figure", kind)
        assert code == 2 and "--figure" in err and "80" in err
    assert not (tmp_path / "x.svg").exists()


def test_without_matplotlib_one_line_says_how_to_install(tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from tui.cli import main; sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", code, "export", "by_hand", "-o", "w.svg"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == ["attnsim: error: pictures: matplotlib is not installed; "
                                                "expected it: pip install 'attnsim[pictures]'"]
    assert not (tmp_path / "w.svg").exists()


def test_importing_tracer_does_not_load_matplotlib():
    done = subprocess.run([sys.executable, "-c", "import sys, tracer, tui.cli; print('matplotlib' in sys.modules)"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.stdout.strip() == "False"
