"""Classes of the lessons that teach a mechanism (CONTRACT §13's small scenarios): every student's
sheet recomputed here with Fractions from the student's own .toml (tomllib, no tracer code), the
mechanism included: the sink's logit kept and its share to fill, QK-norm's exact roots, ALiBi's
penalty, FlashAttention's blocks ending on the plain softmax. And the built-ins small numbers
cannot fill refused with the reason."""
from __future__ import annotations

import csv
import json
import math
import tomllib
from fractions import Fraction
from pathlib import Path

import pytest

from test_classroom import _heads, _mat, _mul, _t
from test_cli_errors import cli, one_error_line
from tracer.classroom import printing
from tracer.classroom.make import make_class

LESSONS = {"sinks": (4, 5), "qk_norm": (3, 6), "alibi": (3, 7), "flash": (2, 8)}   # students, seed


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    root = tmp_path_factory.mktemp("lessons")
    with pytest.MonkeyPatch.context() as mp:   # the PDFs are read back in test_classroom.py
        mp.setattr(printing, "write_pdf", lambda path, pages: Path(path).write_bytes(b"%PDF-"))
        return {name: make_class(name, n, root / name, seed=seed).folder for name, (n, seed) in LESSONS.items()}


def _root(f: Fraction) -> Fraction:
    """√f exactly (the sheet must need no other)."""
    top, bottom = math.isqrt(f.numerator), math.isqrt(f.denominator)
    assert top * top == f.numerator and bottom * bottom == f.denominator, f"√{f} is no fraction"
    return Fraction(top, bottom)


def _normed(rows, gain, eps) -> list:
    """Each row ÷ its root mean square (eps under the root), times the gain."""
    return [[g * v / _root(sum(u * u for u in row) / len(row) + eps) for v, g in zip(row, gain)] for row in rows]


def reference(doc: dict) -> dict[str, list]:
    """The steps of each head under the by-hand preset (⌊s ÷ round(√d_k)⌋, raw powers 3^s), with
    QK-norm, ALiBi's penalty m·(i − j) and the sink's power 3^sink in the sums, in the rows layout."""
    x, w = _mat(doc["x"]), doc["weights"]
    wq, wk, wv = ([_mat(m) for m in _heads(w[key])] for key in ("q", "k", "v"))
    slopes, sinks = doc.get("alibi"), w.get("sinks")
    eps = Fraction(w.get("norm_eps", 0))
    out = {}
    for h in range(len(wq)):
        g = h * len(wk) // len(wq)
        q, k, v = _mul(x, wq[h]), _mul(x, wk[g]), _mul(x, wv[g])
        steps = {"q": q, "k": k, "v": v}
        if "q_norm" in w:
            q = steps["q_norm"] = _normed(q, _mat([w["q_norm"]])[0], eps)
            k = steps["k_norm"] = _normed(k, _mat([w["k_norm"]])[0], eps)
        scores = steps["scores"] = _mul(q, _t(k))
        c = round(math.sqrt(len(wq[h][0])))
        s = steps["scaled"] = [[math.floor(v / c) for v in row] for row in scores]
        if slopes:
            s = steps["biased"] = [[v - Fraction(slopes[h]) * (i - j) for j, v in enumerate(row)]
                                   for i, row in enumerate(s)]
        s = steps["masked"] = [[-math.inf if j > i else v for j, v in enumerate(row)] for i, row in enumerate(s)]
        powers = steps["exp"] = [[Fraction(0) if v == -math.inf else Fraction(3) ** v for v in row] for row in s]
        sink = Fraction(3) ** int(sinks[h]) if sinks else 0
        sums = steps["sums"] = [[sum(row, Fraction(0)) + sink] for row in powers]
        if sinks:
            steps["sink"] = [[sink / total] for (total,) in sums]
        weights = steps["weights"] = [[p / total for p in row] for row, (total,) in zip(powers, sums)]
        steps["z"] = _mul(weights, v)
        out.update({f"h{h}.{name}": m for name, m in steps.items()})
    return out


def _text(v) -> str:
    return "-inf" if v == -math.inf else str(Fraction(v))


def students(folder: Path):
    for student in json.loads((folder / "key.json").read_text(encoding="utf-8"))["students"]:
        yield student, tomllib.loads((folder / f"{student['id']}.toml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", ["sinks", "qk_norm", "alibi"])
def test_every_sheet_of_a_mechanism_is_its_lesson_in_small_fractions(classes, name):
    original = tomllib.loads((Path(__file__).parent.parent / "scenarios" / f"{name}.toml").read_text("utf-8"))
    for student, doc in students(classes[name]):
        for field in ("alibi", "mask", "tokens"):
            assert doc.get(field) == original.get(field), field
        for field in ("sinks", "q_norm", "k_norm", "norm_eps"):   # the lesson's own numbers, kept
            assert doc["weights"].get(field) == original["weights"].get(field), field
        for sid, m in reference(doc).items():
            if sid.split(".")[1] in ("k", "v") and sid not in student["cells"]:
                continue   # keys and values shared by the heads (kv0.k): compared through the scores
            assert student["cells"][sid] == [[_text(v) for v in row] for row in m], (student["id"], sid)
            assert all(v == -math.inf or Fraction(v).denominator <= 243 for row in m for v in row)


def test_a_sinks_sheet_gives_the_sink_and_asks_its_share(classes, capsys, tmp_path):
    folder = classes["sinks"]
    rows = list(csv.reader((folder / "s02.csv").open(encoding="utf-8")))
    assert [r[:3] for r in rows if r[0] == "h0.sink"] == [["h0.sink", str(i), "0"] for i in range(4)]
    assert "the sink's logit 1 " in (folder / "s02.md").read_text(encoding="utf-8")
    for student, doc in students(folder):
        sums = [Fraction(r[0]) for r in student["cells"]["h0.sums"]]
        weights = [[Fraction(v) for v in r] for r in student["cells"]["h0.weights"]]
        share = [Fraction(r[0]) for r in student["cells"]["h0.sink"]]
        assert share == [3 / s for s in sums]                      # 3^1 of every query's sum is the sink's
        assert [sum(r) for r in weights] == [1 - s for s in share]  # the lesson: rows add up to 1 − sink
    key = {s["id"]: s["cells"] for s, _ in students(folder)}
    with (tmp_path / "s02.csv").open("w", encoding="utf-8", newline="") as f:   # follows the lesson: all right
        csv.writer(f).writerows([rows[0][:4]] + [r[:3] + [key["s02"][r[0]][int(r[1])][int(r[2])]] for r in rows[1:]])
    code, out, _ = cli(capsys, "class", "grade", str(folder), str(tmp_path / "s02.csv"))
    n = len(rows) - 1
    assert code == 0 and out.splitlines()[0] == f"s02 (s02.csv): {n} of {n} right, 0 wrong, 0 unanswered"


def test_flash_sheets_end_on_the_plain_softmax_and_differ(classes):
    """The online algorithm's last sums and z are the plain softmax's (3^(s − the row's max) summed,
    and Σ 3^s·v ÷ Σ 3^s), recomputed here; and no two students share their blocks' powers."""
    seen = set()
    for student, doc in students(classes["flash"]):
        x = _mat(doc["x"])
        q, k, v = (_mul(x, _mat(doc["weights"][key])) for key in ("q", "k", "v"))
        scaled = [[math.floor(s / 2) for s in row] for row in _mul(q, _t(k))]
        z = [[sum(Fraction(3) ** s * vj[c] for s, vj in zip(row, v)) / sum(Fraction(3) ** s for s in row)
              for c in range(len(v[0]))] for row in scaled]
        cells = student["cells"]
        assert cells["h0.z"] == [[_text(c) for c in row] for row in z]
        assert cells["h0.blk2.sums"] == [[_text(sum(Fraction(3) ** (s - max(row)) for s in row))] for row in scaled]
        powers = json.dumps([cells[f"h0.blk{b}.powers"] for b in range(3)])
        assert powers not in seen
        seen.add(powers)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_qk_norm_makes_a_class_for_any_seed(tmp_path, capsys, seed, monkeypatch):
    monkeypatch.setattr(printing, "write_pdf", lambda path, pages: Path(path).write_bytes(b"%PDF-"))
    code, out, err = cli(capsys, "class", "make", "qk_norm", "--students", "2", "--seed", str(seed),
                         "-o", str(tmp_path / "c"))
    assert code == 0 and err == "" and out.startswith(f"wrote {tmp_path / 'c'}: 2 sheets of qk_norm")
    for student, doc in students(tmp_path / "c"):
        for sid, m in reference(doc).items():
            assert student["cells"][sid] == [[_text(v) for v in row] for row in m], (student["id"], sid)


@pytest.mark.parametrize("name, why", [
    ("softcap", "soft-capping takes C·tanh(s ÷ C) (C = 5), and tanh of any fraction but 0 is no fraction"),
    ("residual_norm", "a norm divides by a square root (of the variance + eps, eps = 1e-05), which is not a fraction"),
    ("mla", "rotary positions turn the queries and keys by cosines and sines, which are not fractions"),
    ("no_scale", "a norm of the values divides by a square root, which is not a fraction"),
])
def test_a_lesson_small_numbers_cannot_fill_is_refused_with_its_reason(tmp_path, capsys, name, why):
    code, out, err = cli(capsys, "class", "make", name, "--students", "2", "-o", str(tmp_path / "c"))
    assert code == 2 and out == ""
    assert one_error_line(err).startswith(f"SCENARIO: {name} cannot be filled with small numbers: {why}")
    assert list(tmp_path.iterdir()) == []
