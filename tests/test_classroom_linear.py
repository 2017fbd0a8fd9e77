"""Classes of the linear attention lessons (delta_rule, linear_decay; CONTRACT §16): every student's
sheet recomputed here with Fractions from the student's own .toml (tomllib, no tracer code), the
lesson's [linear] numbers kept and given, the states, outputs and implicit weights to fill; and a
[linear] layer with l2 = true refused (its q and k are divided by square roots)."""
from __future__ import annotations

import csv
import json
import tomllib
from fractions import Fraction
from pathlib import Path

import pytest

import tracer
from test_classroom import _heads, _mat, _mul
from tracer.classroom import printing
from tracer.classroom.make import make_class

LESSONS = {"delta_rule": (3, 4), "linear_decay": (3, 5)}   # students, seed


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    root = tmp_path_factory.mktemp("linear")
    with pytest.MonkeyPatch.context() as mp:   # the PDFs are read back in test_classroom.py
        mp.setattr(printing, "write_pdf", lambda path, pages: Path(path).write_bytes(b"%PDF-"))
        return {name: make_class(name, n, root / name, seed=seed).folder for name, (n, seed) in LESSONS.items()}


def _per_head(value, heads: int, n: int) -> list:
    """[linear] decay or beta as written (a number, one a token, one list a head) → heads lists of n."""
    if not isinstance(value, list):
        value = [value] * n
    rows = value if isinstance(value[0], list) else [value] * heads
    return [[Fraction(v).limit_denominator(1000) for v in row] for row in rows]   # 0.333… is the lesson's 1/3


def reference(doc: dict) -> dict:
    """Each head's state (stacked), o, implicit weights and z: S ← α·S − β·k·(kᵀ·α·S) + β·k·vᵀ
    (decay rule: α·S + k·vᵀ), o = Sᵀ·q (by hand ⌊q ÷ round(√d_k)⌋ = q for d_k ≤ 2), A by one-hot values."""
    x, w, lin = _mat(doc["x"]), doc["weights"], doc["linear"]
    wq, wk, wv = ([_mat(m) for m in _heads(w[key])] for key in ("q", "k", "v"))
    n, heads, delta = len(x), len(wq), lin["rule"] == "delta"
    alpha, beta = _per_head(lin.get("decay", 1), heads, n), _per_head(lin.get("beta", 1), heads, n)
    out = {}
    for h in range(heads):
        q, k, v = _mul(x, wq[h]), _mul(x, wk[h * len(wk) // heads]), _mul(x, wv[h * len(wv) // heads])

        def run(values):
            S, states, o = [[Fraction(0)] * len(values[0]) for _ in k[0]], [], []
            for t in range(n):
                a, b = alpha[h][t], beta[h][t] if delta else 1
                S = [[a * s for s in row] for row in S]
                err = [vj - sum(S[i][j] * k[t][i] for i in range(len(S))) if delta else vj
                       for j, vj in enumerate(values[t])]
                S = [[S[i][j] + b * k[t][i] * err[j] for j in range(len(err))] for i in range(len(S))]
                states += S
                o.append([sum(S[i][j] * q[t][i] for i in range(len(S))) for j in range(len(err))])
            return states, o
        states, o = run(v)
        onehot = [[Fraction(int(s == t)) for s in range(n)] for t in range(n)]
        implicit = [list(col) for col in zip(*run(onehot)[1])]   # column s: value s alone
        out.update({f"h{h}.state": states, f"h{h}.o": o, f"h{h}.z": o,
                    f"h{h}.implicit": [list(r) for r in zip(*implicit)]})
    return out


@pytest.mark.parametrize("name", list(LESSONS))
def test_every_sheet_is_the_lesson_in_small_fractions(classes, name):
    original = tomllib.loads((Path(__file__).parent.parent / "scenarios" / f"{name}.toml").read_text("utf-8"))
    key = json.loads((classes[name] / "key.json").read_text(encoding="utf-8"))
    inputs = set()
    for student in key["students"]:
        doc = tomllib.loads((classes[name] / f"{student['id']}.toml").read_text(encoding="utf-8"))
        assert doc["linear"] == original["linear"]   # the lesson's own α and β, kept
        inputs.add(json.dumps([doc["x"], doc["weights"]]))
        for sid, m in reference(doc).items():
            assert student["cells"][sid] == [[str(v) for v in row] for row in m], (student["id"], sid)
            assert all(v.denominator <= 243 for row in m for v in row)
        rows = [r[0] for r in csv.reader((classes[name] / f"{student['id']}.csv").open(encoding="utf-8"))]
        assert "h0.state" in rows and "h0.decay" not in rows and "h0.beta" not in rows   # α, β given
    assert len(inputs) == len(key["students"])


def test_a_sheet_gives_decay_and_beta_filled_in(classes):
    text = (classes["delta_rule"] / "s01.md").read_text(encoding="utf-8")
    decay = text.split("## `h0.decay`")[1].split("## ")[0]
    assert "| **x3** | 1/2 |" in decay and "the decay α of each token" in text


def test_l2_is_refused_for_a_class(tmp_path):
    doc = (Path(__file__).parent.parent / "scenarios" / "delta_rule.toml").read_text(encoding="utf-8")
    path = tmp_path / "l2.toml"
    path.write_text(doc.replace('rule = "delta"', 'rule = "delta"\nl2 = true'), encoding="utf-8")
    with pytest.raises(tracer.ScenarioError, match=r"divided by √\(Σx²\), not small fractions"):
        make_class(str(path), 2, tmp_path / "out", seed=1)
    assert not (tmp_path / "out").exists()
