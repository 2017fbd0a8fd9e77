"""`attnsim class make` (CONTRACT §14): every student's sheet recomputed here with Fractions, from
the student's own .toml read with tomllib (no tracer code), against the bound of 243, the key
and each other; the same seed, the same bytes; the PDFs read back (pages, ids, blank cells,
nothing of the key on a student's sheet, everything inside A4 and Letter); the files the TUI opens."""
from __future__ import annotations

import csv
import json
import math
import re
import tomllib
import zlib
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest

from tracer.classroom.make import make_class

CLASSES = {"by_hand": (5, 11), "gpt_causal": (3, 12), "multi_head": (2, 13)}   # students, seed


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    """One class of each scenario, made once for the module."""
    root = tmp_path_factory.mktemp("classes")
    return {name: make_class(name, n, root / name, seed=seed).folder for name, (n, seed) in CLASSES.items()}


# ---------------------------------------------------------------- a by-hand sheet, with Fractions

def _mat(rows) -> list[list[Fraction]]:
    return [[Fraction(v) for v in row] for row in rows]


def _t(m):
    return [list(col) for col in zip(*m)]


def _mul(a, b):
    return [[sum((x * y for x, y in zip(row, col)), Fraction(0)) for col in zip(*b)] for row in a]


def _heads(value) -> list:
    """One matrix or one per head, as written in the file."""
    return [value] if not isinstance(value[0][0], list) else value


def by_hand(doc: dict) -> dict[str, list]:
    """Every computed step of a scenario file under the by-hand preset (CONTRACT §3: ⌊s ÷ round(√d_k)⌋,
    raw powers of 3), exactly, in the rows orientation (one row per query or token)."""
    cols = doc.get("layout", "rows") == "columns"
    flip = _t if cols else (lambda m: m)
    x = flip(_mat(doc["x"]))
    w = doc["weights"]
    wq, wk, wv = ([flip(_mat(m)) for m in _heads(w[key])] for key in ("q", "k", "v"))
    n, out, zs = len(x), {}, []
    for h in range(len(wq)):
        q, k, v = _mul(x, wq[h]), _mul(x, wk[h]), _mul(x, wv[h])
        scores = _mul(q, _t(k))
        c = round(math.sqrt(len(wq[h][0])))
        scaled = [[s // c for s in row] for row in scores]
        causal = doc.get("mask", "none") == "causal"
        masked = [[-math.inf if causal and j > i else s for j, s in enumerate(row)] for i, row in enumerate(scaled)]
        powers = [[Fraction(0) if s == -math.inf else Fraction(3) ** s for s in row] for row in masked]
        sums = [[sum(row, Fraction(0))] for row in powers]
        weights = [[p / total[0] for p in row] for row, total in zip(powers, sums)]
        z = _mul(weights, v)
        zs.append(z)
        steps = {"q": q, "k": k, "v": v, "scores": scores, "scaled": scaled}
        if causal:
            steps["masked"] = masked
        steps.update(exp=powers, sums=sums, weights=weights, z=z)
        out.update({f"h{h}.{key}": m for key, m in steps.items()})
    if len(zs) > 1:
        out["concat"] = [sum((z[i] for z in zs), []) for i in range(n)]
    if "o" in w:
        out["out"] = _mul(out.get("concat", zs[0]), flip(_mat(w["o"])))
    if cols:   # the columns layout writes each step transposed (sums as 1 × N)
        out = {sid: _t(m) for sid, m in out.items()}
    return out


def _text(v) -> str:
    return "-inf" if v == -math.inf else str(Fraction(v))


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_every_cell_of_every_sheet_is_a_small_fraction_and_the_key_says_so(classes, name):
    folder = classes[name]
    key = json.loads((folder / "key.json").read_text(encoding="utf-8"))
    assert [s["id"] for s in key["students"]] == [f"s{i:02d}" for i in range(1, CLASSES[name][0] + 1)]
    seen = set()
    for student in key["students"]:
        doc = tomllib.loads((folder / f"{student['id']}.toml").read_text(encoding="utf-8"))
        original = tomllib.loads((Path(__file__).parent.parent / "scenarios" / f"{name}.toml").read_text("utf-8"))
        for field in ("layout", "mask", "tokens"):   # the lesson's shapes, heads, mask and layout
            assert doc.get(field) == original.get(field), field
        assert doc["arithmetic"] == "by-hand"
        assert _shapes(doc) == _shapes(original)
        assert all(v == int(v) for row in _all_numbers(doc) for v in row)   # small whole numbers given
        steps = by_hand(doc)
        assert list(student["cells"]) == list(steps)
        for sid, m in steps.items():
            cells = [v for row in m for v in row]
            assert all(v == -math.inf or Fraction(v).denominator <= 243 for v in cells), (student["id"], sid)
            assert student["cells"][sid] == [[_text(v) for v in row] for row in m], (student["id"], sid)
        for sid, m in steps.items():
            if sid.endswith(".weights"):
                for row, allowed in zip(m, steps.get(sid.replace("weights", "masked"), m)):
                    seen_keys = [w for w, a in zip(row, allowed) if a != -math.inf]
                    assert len(seen_keys) < 2 or len(set(seen_keys)) > 1, (student["id"], sid, row)
        given = json.dumps([doc["x"], doc["weights"]])
        assert given not in seen and given != json.dumps([original["x"], original["weights"]])
        seen.add(given)


def _shapes(doc) -> list:
    def shape(m):
        return (len(m), len(m[0])) if not isinstance(m[0][0], list) else tuple(shape(x) for x in m)
    return [shape(doc["x"])] + [shape(doc["weights"][k]) for k in sorted(doc["weights"])]


def _all_numbers(doc):
    for m in [doc["x"], *doc["weights"].values()]:
        yield from (row for mat in _heads(m) for row in mat)


def test_the_answer_sheet_is_the_csv_export_of_the_computed_steps_with_values_empty(classes):
    folder = classes["gpt_causal"]
    key = json.loads((folder / "key.json").read_text(encoding="utf-8"))
    rows = list(csv.reader((folder / "s02.csv").open(encoding="utf-8")))
    assert rows[0] == ["step", "row", "col", "value", "row_label", "col_label"]
    cells = key["students"][1]["cells"]
    assert [(r[0], int(r[1]), int(r[2])) for r in rows[1:]] == [
        (sid, i, j) for sid, m in cells.items() for i in range(len(m)) for j in range(len(m[0]))]
    assert {r[3] for r in rows[1:]} == {""}
    assert rows[1][4:] == ["the", "0"] and ("h0.weights", "2", "1", "", "sat", "cat") in map(tuple, rows)


def test_the_md_sheet_is_blank_and_names_the_student(classes):
    text = (classes["by_hand"] / "s03.md").read_text(encoding="utf-8")
    assert text.startswith("# Self-attention by hand: the classroom worksheet (s03)")
    table = text.split("## `h0.weights`")[1].split("##")[0]
    assert "| **x1** |  |  |  |  |" in table


def test_same_seed_same_bytes_another_seed_other_numbers(classes, tmp_path):
    again = make_class("by_hand", 5, tmp_path / "again", seed=11).folder
    files = sorted(p.name for p in classes["by_hand"].iterdir())
    assert files == sorted(p.name for p in again.iterdir())
    assert len(files) == 5 * 4 + 2
    for name in files:
        assert (again / name).read_bytes() == (classes["by_hand"] / name).read_bytes(), name
    other = make_class("by_hand", 1, tmp_path / "other", seed=12).folder
    assert (other / "s01.toml").read_bytes() != (again / "s01.toml").read_bytes()


# ---------------------------------------------------------------- the PDFs, read back

def pdf_pages(path: Path) -> tuple[int, list[str], list[tuple[float, float]]]:
    """(pages, the texts drawn, the points of every path and text), from the pages' content
    streams (not the fonts' glyph drawings)."""
    data = path.read_bytes()
    assert data.startswith(b"%PDF-")
    objects = {int(n): body for n, body in re.findall(rb"(?s)(\d+) 0 obj\n(.*?)endobj", data)}
    pages = [body for body in objects.values() if re.search(rb"/Type /Page\b(?!s)", body)]
    texts, points = [], []
    for page in pages:
        contents = objects[int(re.search(rb"/Contents (\d+) 0 R", page).group(1))]
        raw = re.search(rb"(?s)stream\r?\n(.*?)\r?\nendstream", contents).group(1)
        stream = zlib.decompress(raw).decode("latin-1")
        for block in re.findall(r"\nBT\n(.*?)\nET\n", stream, re.S):   # one drawn text (its glyph runs)
            shown = re.findall(r"\[(.*?)\]\s*TJ", block, re.S)
            text = "".join(s for run in shown for s in re.findall(r"\(((?:\\.|[^\\)])*)\)", run))
            texts.append(re.sub(r"[\x00-\x1f]", "?", text))   # a glyph beyond ASCII (−, ᵀ): codes vary by file
        points += [(float(a), float(b)) for a, b in re.findall(r"(-?[\d.]+) (-?[\d.]+) [ml]\n", stream)]
        points += [(float(a), float(b)) for a, b in re.findall(r"1 0 -?0 1 (-?[\d.]+) (-?[\d.]+) cm", stream)]
    return len(pages), texts, points


def test_a_students_pdf_has_the_id_blank_cells_and_none_of_the_keys_numbers(classes):
    folder = classes["by_hand"]
    key = json.loads((folder / "key.json").read_text(encoding="utf-8"))
    sheet_pages, sheet, _ = pdf_pages(folder / "s02.pdf")
    key_pages, filled, _ = pdf_pages(folder / "key.pdf")
    assert sheet_pages == 2 and key_pages == 2 * 5
    assert "s02" in sheet and "Answer key: s02" not in sheet and "Answer key: s05" in filled
    cells = key["students"][1]["cells"]
    fractions = {v for m in cells.values() for row in m for v in row if "/" in v and v[0] != "-"}
    assert fractions and not fractions & set(sheet)
    assert fractions <= set(filled)
    _, one_key, _ = pdf_pages(_first_student_key(folder, tmp=folder.parent / "k2"))
    computed = sum(len(m) * len(m[0]) for m in cells.values())
    factors = 2 * len(cells["h0.k"]) * len(cells["h0.k"][0])   # Kᵀ beside the scores, V beside the weights
    cell_words = lambda texts: Counter(t for t in texts if " " not in t)   # noqa: E731  (not a header line)
    assert sum((cell_words(one_key) - cell_words(sheet)).values()) == computed + factors
    assert cell_words(sheet) - cell_words(one_key) == Counter(["s02"])   # the sheet's id line; no cell more


def _first_student_key(folder: Path, tmp: Path) -> Path:
    """The key pages of s02 alone, as the class's key.pdf draws them."""
    import tracer
    from tracer.classroom import printing
    path = tmp.with_suffix(".pdf")
    printing.write_pdf(path, printing.sheet(tracer.run(str(folder / "s02.toml")), "s02", blank=False))
    return path


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_every_page_prints_whole_on_a4_and_letter(classes, name):
    a4, letter = (595.28, 841.89), (612.0, 792.0)
    for path in (classes[name] / "s01.pdf", classes[name] / "key.pdf"):
        data = path.read_bytes()
        for w, h in re.findall(rb"/MediaBox \[ 0 0 ([\d.]+) ([\d.]+) \]", data):
            assert float(w) <= min(a4[0], letter[0]) and float(h) <= min(a4[1], letter[1])
        width, height = map(float, re.search(rb"/MediaBox \[ 0 0 ([\d.]+) ([\d.]+) \]", data).groups())
        _, texts, points = pdf_pages(path)
        inside = [(x, y) for x, y in points if 0 <= x <= width and 0 <= y <= height]
        assert len(inside) == len(points) > 100   # nothing off the page (the page's own frame is on it)
        drawn = [(x, y) for x, y in points if not (x in (0, width) or y in (0, height))]
        assert all(18 <= x <= width - 18 and 18 <= y <= height - 18 for x, y in drawn)   # a quarter inch clear


def test_the_student_file_opens_with_the_keys_numbers(classes):
    import tracer
    folder = classes["multi_head"]
    key = json.loads((folder / "key.json").read_text(encoding="utf-8"))
    trace = tracer.run(str(folder / "s02.toml"))     # as the TUI's `o` opens it: the file's own preset
    assert trace.arithmetic.preset == "by-hand" and trace.scenario.name == "multi_head-s02"
    for sid, m in key["students"][1]["cells"].items():
        want = [-math.inf if v == "-inf" else float(Fraction(v)) for row in m for v in row]
        assert trace[sid].ravel().tolist() == pytest.approx(want, rel=1e-15), sid


@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_the_largest_sheet_a_class_takes_still_prints_whole(tmp_path, layout):
    """12 tokens of 16 features, two heads of 16 and W_O: every page's drawing stays inside it."""
    import numpy as np
    import tracer
    from tracer.classroom import printing
    rng = np.random.default_rng(0)
    small = lambda *shape: rng.integers(-1, 2, size=shape).astype(float)   # noqa: E731
    x, q, k, v, o = small(12, 16), small(2, 16, 16), small(2, 16, 16), small(2, 16, 16), small(32, 16)
    if layout == "columns":
        x, q, k, v, o = x.T, q.transpose(0, 2, 1), k.transpose(0, 2, 1), v.transpose(0, 2, 1), o.T
    scenario = tracer.from_arrays(x, list(q), list(k), list(v), o, layout=layout, mask="causal", name="big",
                                  title="A long title " * 6, description="A lesson of many words. " * 150)
    trace = tracer.run(scenario, "by-hand", stable=True)
    for blank in (True, False):
        path = tmp_path / f"{blank}.pdf"
        printing.write_pdf(path, printing.sheet(trace, "s01", blank=blank))
        pages, _, points = pdf_pages(path)
        width, height = map(float, re.search(rb"/MediaBox \[ 0 0 ([\d.]+) ([\d.]+) \]", path.read_bytes()).groups())
        drawn = [(px, py) for px, py in points if not (px in (0, width) or py in (0, height))]
        assert pages >= 2 and all(18 <= px <= width - 18 and 18 <= py <= height - 18 for px, py in drawn)
