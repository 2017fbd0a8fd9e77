"""An export alone reproduces its trace: the inputs and every weight (biases, low-rank factors,
grouped keys, the context) are written beside the steps, and CSV names rows and columns."""
import csv
import json

import numpy as np
import pytest

import tracer
import tracer.export
from tui.cli import main

SCENARIOS = ["by_hand", "multi_head", "low_rank", "biases", "gqa", "keys_as_values", "cross_attention",
             "residual_norm", "rope", "gpt_causal", "qk_norm", "softcap", "alibi", "streaming", "rope_scaling_yarn", "mla"]


def rebuild(doc: dict):
    """A scenario from nothing but an export's JSON (its given matrices and descriptions)."""
    sc, given = doc["scenario"], {g["name"]: np.array(g["data"], dtype=float) for g in doc["given"]}
    per = lambda name: [given[k] for k in sorted(given) if k.startswith(f"weights.{name}[")] or None  # noqa: E731
    bias = lambda name: None if f"weights.{name}" not in given else list(given[f"weights.{name}"])  # noqa: E731
    kw = dict(x=given["x"], q=per("q"), k=per("k"), v=per("v"), v_down=per("v_down"), v_up=per("v_up"),
              o=given.get("weights.o"), layout=sc["layout"], tokens=sc["tokens"], mask=doc["arithmetic"]["mask"],
              bq=bias("bq"), bk=bias("bk"), bv=bias("bv"), residual=sc["residual"], rope=sc.get("rope"))
    if "weights.bo" in given:
        kw["bo"] = given["weights.bo"][0]
    if "context" in given:
        kw.update(context=given["context"], context_tokens=sc["context_tokens"])
    if sc.get("v") == "k" or (kw["v"] is None and kw["v_down"] is None):
        kw["v"] = "k"
    if "qk_norm" in sc:
        kw.update(q_norm=list(given["weights.q_norm"]), k_norm=list(given["weights.k_norm"]),
                  qk_norm_eps=sc["qk_norm"]["eps"], qk_norm_scope=sc["qk_norm"]["scope"])
    if "out_norm" in sc:
        kw["out_norm"] = dict(gain=given["out_norm.gain"][0], eps=sc["out_norm"]["eps"])
    kw.update(softcap=sc.get("softcap"), alibi=sc.get("alibi"))
    if "mla" in sc:   # latent attention: its matrices by their [mla] names, the heads' in order
        mla = {key: [given[k] for k in sorted(given) if k.startswith(f"mla.{key}[")] for key in ("up_k", "up_v", "q", "rope_q")}
        mla.update({key: given[f"mla.{key}"] for key in ("down", "rope_k", "q_down") if f"mla.{key}" in given})
        mla.update({key: given[f"mla.{key}"][0] for key in ("kv_norm", "q_norm") if f"mla.{key}" in given})
        kw.update(q=None, k=None, v=None, mla=dict(mla, norm_eps=sc["mla"]["eps"]))
    return tracer.from_arrays(**{k: v for k, v in kw.items() if v is not None})


@pytest.mark.parametrize("name", SCENARIOS)
def test_a_json_export_alone_reproduces_the_trace(name, tmp_path):
    trace = tracer.run(name)
    tracer.export.write_export(trace, tmp_path / "t.json")
    doc = json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))
    a = {k: v for k, v in doc["arithmetic"].items() if k not in ("preset", "layout", "mask")}
    again = tracer.run(rebuild(doc), doc["arithmetic"]["preset"], **a)
    assert [s.id for s in again.steps] == [s["id"] for s in doc["steps"]]
    for step in doc["steps"]:
        np.testing.assert_allclose(again[step["id"]], np.array(step["data"], dtype=float), rtol=1e-12, atol=1e-12)


def test_npz_and_csv_hold_the_same_given_matrices(tmp_path):
    trace = tracer.run("multi_head")
    for ext in ("json", "npz", "csv"):
        tracer.export.write_export(trace, tmp_path / f"t.{ext}")
    doc = json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))
    names = [g["name"] for g in doc["given"]]
    assert names == ["x", "weights.q[0]", "weights.q[1]", "weights.k[0]", "weights.k[1]",
                     "weights.v[0]", "weights.v[1]", "weights.o"]
    with np.load(tmp_path / "t.npz", allow_pickle=False) as z:
        for g in doc["given"]:
            np.testing.assert_array_equal(z[f"given/{g['name']}"], np.array(g["data"]))
    with open(tmp_path / "t.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["step"] for r in rows} >= {f"given/{n}" for n in names}
    w = [r for r in rows if r["step"] == "h0.weights"]
    tokens = trace.scenario.tokens
    assert all(r["row_label"] == tokens[int(r["row"])] and r["col_label"] == tokens[int(r["col"])] for r in w)


def test_csv_labels_with_commas_stay_one_field(tmp_path):
    eye = np.eye(2)
    trace = tracer.run(tracer.from_arrays(x=eye, q=eye, k=eye, v=eye, tokens=["a,b", 'say "hi"']))
    tracer.export.write_export(trace, tmp_path / "t.csv")
    with open(tmp_path / "t.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["row_label"] for r in rows if r["step"] == "x"} == {"a,b", 'say "hi"'}


def test_a_successful_export_says_what_it_wrote(tmp_path, capsys):
    assert main(["export", "by_hand", "-o", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    assert "10 steps" in out and "weights.q[0]" in out and "4 tokens" in out


@pytest.mark.parametrize("ext,figure", [("json", None), ("npz", None), ("csv", None), ("svg", "heatmap")])
def test_blank_where_nothing_can_be_blank_is_an_error(tmp_path, capsys, ext, figure):
    argv = ["export", "by_hand", "-o", str(tmp_path / f"t.{ext}"), "--blank"] + (["--figure", figure] if figure else [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--blank" in err and not (tmp_path / f"t.{ext}").exists()


def test_the_md_worksheet_speaks_of_the_worksheet(tmp_path):
    tracer.export.write_export(tracer.run("by_hand"), tmp_path / "t.md", blank=True)
    text = (tmp_path / "t.md").read_text(encoding="utf-8")
    assert "Press" not in text and "stable" not in text and "False" not in text
    assert "raw powers" in text and "Fill in" in text


def test_an_export_of_every_mechanism_reproduces_the_trace(tmp_path):
    """QK-norm over every head (their gains given), grouped keys, partial rotary with yarn, a cap,
    ALiBi slopes and the output's norm: all in the export, enough to run it again."""
    rng = np.random.default_rng(3)
    r = lambda *shape: rng.normal(size=shape)  # noqa: E731
    sc = tracer.from_arrays(r(5, 6), list(r(4, 6, 4)), list(r(2, 6, 4)), list(r(2, 6, 4)), o=r(16, 6),
                            q_norm=list(r(4, 4)), k_norm=list(r(2, 4)), qk_norm_scope="all", qk_norm_eps=1e-5,
                            rope=dict(base=50.0, dims=2, scaling=dict(type="yarn", factor=4.0,
                                                                      original_max_position_embeddings=8)),
                            softcap=3.0, alibi=True, out_norm=dict(gain=r(6), eps=1e-6), mask="causal",
                            residual=dict(norm="none"), layout="rows")
    trace = tracer.run(sc)
    tracer.export.write_export(trace, tmp_path / "t.json")
    doc = json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))
    again = tracer.run(rebuild(doc))
    for step in doc["steps"]:
        np.testing.assert_allclose(again[step["id"]], np.array(step["data"], dtype=float), rtol=1e-12, atol=1e-12)
