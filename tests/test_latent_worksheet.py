"""Latent attention on a worksheet (`--figure worksheet`, the md export): every given matrix a student
needs is there, under the name its step's formula uses (W_DKV, W_KR, W_UQ, W_QR, W_UK, W_UV; the
values' matrix is W_UV, not W_V), and multiplying it by the step's input gives the step; the rotary
frequencies' column is θ, not Σ."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import tracer

SVG = "{http://www.w3.org/2000/svg}"
LATENT = {"c_kv": "W_DKV", "k_pe": "W_KR", "h0.q_nope": "W_UQ (head 0)", "h0.q_pe": "W_QR (head 0)",
          "h0.k_nope": "W_UK (head 0)", "h0.v": "W_UV (head 0)"}


def texts(svg: str) -> list[str]:
    return ["".join(node.itertext()) for node in ET.fromstring(svg).iter(f"{SVG}text")]


@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_the_figure_worksheet_gives_every_latent_matrix_by_its_name(layout):
    pytest.importorskip("matplotlib")
    from tracer.figures import figure_svg
    trace = tracer.run("mla", layout=layout)
    for blank in (False, True):
        found = texts(figure_svg(trace, ["h0.z"], "worksheet", blank))
        for sid, name in LATENT.items():
            assert f"{name} (given)" in found, (name, blank)
            symbol = name.split(" ")[0]
            assert symbol in trace.step(sid).formula   # the name the formula uses
        assert not any(t.startswith("W_V ") for t in found)   # the values' matrix is W_UV
        assert "[K_NOPE, K_PE]ᵀ" in found and "[C_KV, K_PE]ᵀ" in found   # both parts of every key
        # the rotary frequencies' one column: θ (Σ heads the sums only)
        freqs_row = [t for t in found if t in ("θ", "Σ")]
        assert freqs_row.count("θ") == 1 and freqs_row.count("Σ") == 1


def rows_of(trace, sid):
    return np.asarray(trace.rows(sid), dtype=np.float64)


def test_each_given_matrix_makes_its_step():
    """Independently of the figure: the input's rows times the rows layout's matrix are the step
    (before the rotation, for the rotary parts: position 0 is not turned)."""
    from tracer.given_inputs import factor
    trace = tracer.run("mla", "exact")
    sc = trace.scenario
    x, c_kv = np.asarray(sc.x, dtype=np.float64), rows_of(trace, "c_kv")
    for sid, left in (("c_kv", x), ("h0.q_nope", x), ("h1.q_nope", x), ("h0.k_nope", c_kv), ("h1.v", c_kv)):
        _, w = factor(trace, trace.step(sid))
        np.testing.assert_allclose(left @ w, rows_of(trace, sid), atol=1e-12)
    for sid in ("k_pe", "h1.q_pe"):
        _, w = factor(trace, trace.step(sid))
        np.testing.assert_allclose((x @ w)[0], rows_of(trace, sid)[0], atol=1e-12)
    name, w_ukt = factor(trace, trace.step("h1.q_latent"))
    assert name == "W_UKᵀ (head 1)"
    np.testing.assert_allclose(rows_of(trace, "h1.q_nope") @ w_ukt, rows_of(trace, "h1.q_latent"), atol=1e-12)
    # the columns layout writes each matrix transposed, named as its formula names it
    columns = tracer.run("mla", "exact", layout="columns")
    for sid in ("c_kv", "h0.k_nope", "h1.q_latent"):
        name, w = factor(columns, columns.step(sid))
        np.testing.assert_array_equal(w, factor(trace, trace.step(sid))[1].T)
        assert name.split(" ")[0] in columns.step(sid).formula


def test_the_blank_md_worksheet_gives_them_too(tmp_path):
    from tracer.export import write_export
    path = write_export(tracer.run("mla"), tmp_path / "sheet.md", blank=True)
    headings = re.findall(r"^### Given: (.+)$", path.read_text(encoding="utf-8"), re.M)
    assert set(LATENT.values()) | {"W_UQ (head 1)", "W_UV (head 1)"} <= set(headings)
