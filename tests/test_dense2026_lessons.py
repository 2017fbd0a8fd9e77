"""The built-ins of the dense families of 2026 (CONTRACT §17) against their numbers worked by hand
in Fractions here (from the files' inputs, read with tomllib, not the package): `no_scale` (scale 1,
QK-norm and the values' norm), `kv_sharing` (two query sets over one key/value pair)."""
from __future__ import annotations

import math
import tomllib
from fractions import Fraction

import numpy as np
import pytest

import tracer
from tracer.scenario import scenarios_dir


def read(name: str) -> dict:
    return tomllib.loads((scenarios_dir() / f"{name}.toml").read_text(encoding="utf-8"))


def matmul(a, b) -> list:
    return [[sum(Fraction(a[i][t]) * Fraction(b[t][j]) for t in range(len(b))) for j in range(len(b[0]))]
            for i in range(len(a))]


def rms_normed(rows) -> list:
    """Each row ÷ √(mean of its squares) (eps 0): the lessons pick rows whose mean square is a square."""
    out = []
    for row in rows:
        ms = sum(v * v for v in row) / len(row)
        root = Fraction(math.isqrt(ms.numerator), math.isqrt(ms.denominator))
        assert root * root == ms, row
        out.append([v / root for v in row])
    return out


def attend(q, k, v, divide) -> tuple[list, list]:
    """Causal softmax in base 3 (the by-hand preset) of ⌊q·k ÷ divide⌋: weights and z."""
    weights, z = [], []
    for i, qi in enumerate(q):
        s = [sum(a * b for a, b in zip(qi, k[j])) for j in range(i + 1)]
        powers = [Fraction(3) ** math.floor(x / divide) for x in s]
        row = [p / sum(powers) for p in powers] + [Fraction(0)] * (len(q) - i - 1)
        weights.append(row)
        z.append([sum(w * v[j][c] for j, w in enumerate(row)) for c in range(len(v[0]))])
    return weights, z


def close(trace, sid: str, want) -> None:
    np.testing.assert_allclose(trace.rows(sid), np.array(want, float), rtol=1e-14, atol=1e-15, err_msg=sid)


def test_no_scale_in_fractions():
    data = read("no_scale")
    w = data["weights"]
    q, k = rms_normed(matmul(data["x"], w["q"])), rms_normed(matmul(data["x"], w["k"]))
    v = matmul(data["x"], w["v"])
    v_norm = rms_normed(v)
    trace = tracer.run("no_scale")
    weights, z = attend(q, k, v_norm, 1)   # scale 1: the scores as they are
    for sid, want in (("h0.q_norm", q), ("h0.k_norm", k), ("h0.v", v), ("h0.v_norm", v_norm), ("h0.weights", weights),
                      ("h0.z", z)):
        close(trace, sid, want)
    np.testing.assert_array_equal(trace.rows("h0.scaled"), trace.rows("h0.scores"))
    assert weights[3] == [Fraction(1, 172), Fraction(81, 172), Fraction(9, 172), Fraction(81, 172)]
    assert v_norm[1] == v_norm[3] == [1, -1] and z[3] == [1, Fraction(-38, 43)]
    sqrt, _ = attend(q, k, v_norm, 2)      # ÷√d_k by hand: ⌊s ÷ 2⌋
    close(tracer.run("no_scale", scale="sqrt"), "h0.weights", sqrt)
    assert sqrt[3] == [Fraction(1, 22), Fraction(9, 22), Fraction(3, 22), Fraction(9, 22)]


def test_kv_sharing_in_fractions():
    data = read("kv_sharing")
    w = data["weights"]
    k, v = matmul(data["x"], w["k"][0]), matmul(data["x"], w["v"][0])
    trace = tracer.run("kv_sharing")
    close(trace, "kv0.k", k)
    close(trace, "kv0.v", v)
    assert k == [[1, 0], [0, 1], [1, 1], [0, 0]] and v == [[2, 1], [1, 2], [1, 1], [1, 1]]
    rows = {}
    for h in (0, 1):   # d_k = 2: ⌊s ÷ round(√2)⌋ = s
        q = matmul(data["x"], w["q"][h])
        rows[h] = attend(q, k, v, 1)
        close(trace, f"h{h}.q", q)
        close(trace, f"h{h}.weights", rows[h][0])
        close(trace, f"h{h}.z", rows[h][1])
    # "gave" looks mostly at itself in layer A (h0) and mostly at "she" in layer B (h1): same keys, new questions
    assert rows[0][0][1][:2] == [Fraction(1, 4), Fraction(3, 4)] and rows[1][0][1][:2] == [Fraction(3, 4), Fraction(1, 4)]
    assert rows[1][1][1] == [Fraction(7, 4), Fraction(5, 4)]
    assert trace.step("kv0.k").title.startswith("Keys of layer A, shared")


def test_kv_sharing_counts_the_cache_once():
    from tracer.step_notes import notes
    trace = tracer.run("kv_sharing")
    out = " ".join(notes(trace, trace.step("h1.q")))
    per_layer = 1 * 4 * (2 + 2)   # one key/value head × 4 tokens × (d_k + d_v)
    assert f"the two layers keep {per_layer} numbers, against {2 * per_layer}" in out
    assert "each new token adds 4 numbers instead of 8" in out


@pytest.mark.parametrize("name", ["chunked", "kv_sharing"])
def test_a_class_keeps_the_chunks_and_the_shared_keys(tmp_path, name):
    import json

    from tui.cli import main
    assert main(["class", "make", name, "--students", "2", "--seed", "3", "-o", str(tmp_path / "c")]) == 0
    original = read(name)
    key = json.loads((tmp_path / "c" / "key.json").read_text(encoding="utf-8"))
    for student in key["students"]:
        doc = tomllib.loads((tmp_path / "c" / f"{student['id']}.toml").read_text(encoding="utf-8"))
        assert doc["mask"] == original["mask"] and doc.get("shared_kv") == original.get("shared_kv")
        w = {key: m if np.ndim(m) == 3 else [m] for key, m in doc["weights"].items()}   # one matrix per head
        k, v = matmul(doc["x"], w["k"][0]), matmul(doc["x"], w["v"][0])
        for h in range(len(w["q"])):
            q = matmul(doc["x"], w["q"][h])
            if name == "chunked":   # the chunk mask by hand: hidden keys of an earlier chunk get 0
                weights = []
                for i, qi in enumerate(q):
                    s = [sum(a * b for a, b in zip(qi, k[j])) for j in range(i + 1)]
                    p = [Fraction(3) ** s[j] if j // 4 == i // 4 else Fraction(0) for j in range(i + 1)]
                    weights.append([x / sum(p) for x in p] + [Fraction(0)] * (len(q) - i - 1))
            else:
                weights, _ = attend(q, k, v, 1)
            assert student["cells"][f"h{h}.weights"] == [[str(x) for x in row] for row in weights]
            assert all(x.denominator <= 243 for row in weights for x in row)


def test_no_scale_exports_as_a_worksheet(tmp_path):
    """The md sheet states the arithmetic in words: scale 1 is "scores not scaled" (it once failed
    to write, having no divisor to print)."""
    from tui.cli import main
    assert main(["export", "no_scale", "-o", str(tmp_path / "n.md")]) == 0
    text = (tmp_path / "n.md").read_text(encoding="utf-8")
    assert "scores not scaled" in text and "h0.v_norm" in text
