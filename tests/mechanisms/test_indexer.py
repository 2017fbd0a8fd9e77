"""The lightning indexer written by hand (CONTRACT §18; mechanisms/indexer): `[sparse] topk` with
`[weights] index_q`, `index_k`, `index_w`, its steps idx.q … idx.selected before the heads and the
heads' weights exactly 0 at the keys it dropped. The built-in `sparse_topk` against the lesson worked
in Fractions (tests/test_sparse_lesson.worked), both layouts; `--set topk`; the refusals through the
CLI; from_arrays with tensors; the exports; properties on generated layers against NumPy written here."""
from __future__ import annotations

import json
import math
import tomllib
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracer
from test_sparse_lesson import LESSON, worked
from tracer.scenario import scenarios_dir
from tui.cli import main

N = 4


@pytest.fixture(scope="module")
def lesson() -> dict:
    return worked()


def fraction(value: float) -> F:
    return F(float(value)).limit_denominator(10_000)


def rows_of(trace, sid: str) -> list[list]:
    return [[fraction(v) if math.isfinite(v) else v for v in row] for row in trace.rows(sid)]


@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_sparse_topk_is_the_lesson_worked_in_fractions(lesson, layout):
    trace = tracer.run("sparse_topk", layout=layout)
    iq, ik, iw = lesson["idx"]
    assert rows_of(trace, "idx.q") == iq and rows_of(trace, "idx.k") == ik and rows_of(trace, "idx.w") == iw
    assert rows_of(trace, "idx.scores") == [[-math.inf if v is None else v for v in row] for row in lesson["index"]]
    assert [set(np.flatnonzero(row)) for row in trace.rows("idx.selected")] == lesson["keep"]
    assert rows_of(trace, "h0.weights") == lesson["sparse"]
    assert rows_of(trace, "h0.z") == lesson["z"]
    assert trace.rows("h0.weights")[3, 1] == 0.0 and trace.rows("h0.weights")[3, 3] == 0.0   # exactly 0
    assert trace["idx.scores"].shape == (N, N) and trace["idx.q"].shape == ((N, 1) if layout == "rows" else (1, N))
    ids = [s.id for s in trace.steps]
    assert ids[:6] == ["x", "idx.q", "idx.k", "idx.w", "idx.scores", "idx.selected"]
    axes = {s.id: s.axes for s in trace.steps}
    want = ("token", "index_feature") if layout == "rows" else ("index_feature", "token")
    assert axes["idx.q"] == want and axes["idx.selected"] == (("query", "key") if layout == "rows" else ("key", "query"))


def test_under_exact_the_same_keys_and_e_powers():
    trace = tracer.run("sparse_topk", arithmetic="exact")
    e2 = math.exp(2)
    np.testing.assert_allclose(trace.rows("h0.weights")[3], [1 / (1 + e2), 0, e2 / (1 + e2), 0], rtol=1e-14)
    assert [set(np.flatnonzero(row)) for row in trace.rows("idx.selected")] == [{0}, {0, 1}, {0, 2}, {0, 2}]


def test_the_explanations_say_why_a_key_was_kept_or_dropped():
    t = tracer.run("sparse_topk")
    assert t.explain("idx.scores", 3, 3) == ("idx.scores[query sat, key sat] = 1·ReLU(−1) = 0 = 0   (index head 0 "
                                            "disagrees: cut to 0, not a vote against)   (dropped: the 2nd best of "
                                            "query sat is 1)")
    assert t.explain("idx.scores", 3, 2).endswith("= 2   (kept: the 2nd best of query sat is 1)")
    assert t.explain("idx.scores", 1, 0).endswith("(kept: query the sees no more than k = 2 keys)")
    assert t.explain("idx.scores", 1, 3).endswith("= −∞   (key sat comes after query the: the indexer is causal)")
    assert t.explain("idx.selected", 3, 2).endswith("= 1   (kept: index score 2 ranks 1 of 4, within the top k = 2 "
                                                   "(the 2nd best is 1))")
    assert t.explain("idx.selected", 3, 1).endswith("= 0   (dropped: index score 0 ranks 3 of 4, below the 2nd best, "
                                                   "1; its weight is 0 in every head)")
    assert t.explain("h0.masked", 3, 1) == ("h0.masked[query sat, key the] = −∞   (the indexer dropped key the for "
                                           "query sat: index score 0 ranks 3 of 4, below the 2nd best, 1; its weight "
                                           "will be exactly 0)")
    assert t.explain("h0.masked", 1, 3).endswith("(key sat comes after query the: masked)")
    assert t.explain("h0.weights", 3, 2).endswith("= 9 ÷ 10 = 9/10 ≈ 0.9   (dense attention would give 3/4: the 2 "
                                                 "kept keys held 5/6 of the powers, and now share all of it: 3/4 ÷ (5/6))")
    assert t.explain("h0.weights", 3, 1).endswith("(dropped by the indexer: dense attention would give 1/12)")
    assert t.explain("h0.weights", 1, 0).endswith("(how much the attends to <s>)")   # it dropped nothing
    assert "idx.selected" in t.step("h0.masked").formula


def without_sparse() -> dict:
    data = tomllib.loads((scenarios_dir() / "sparse_topk.toml").read_text(encoding="utf-8"))
    del data["sparse"]
    data["weights"] = {k: v for k, v in data["weights"].items() if not k.startswith("index_")}
    return data


def test_set_topk_to_every_key_is_dense_attention(lesson):
    dense = tracer.from_arrays(**{k: v for k, v in without_sparse().items() if k in ("x", "mask", "tokens")},
                               **{k: without_sparse()["weights"][k] for k in "qkv"}, arithmetic="by-hand")
    for k in (4, 9):
        trace = tracer.run("sparse_topk", topk=k)
        assert rows_of(trace, "h0.weights") == lesson["dense"]
        np.testing.assert_array_equal(trace.rows("h0.z"), tracer.run(dense).rows("h0.z"))
        assert trace.arithmetic.as_dict()["topk"] == k
    assert "topk" not in tracer.run("sparse_topk").arithmetic.as_dict()


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv, line", [
    (["show", "sparse_topk", "--set", "topk=0"],
     "attnsim: error: --set topk: expected a whole number ≥ 1 (the keys each query keeps), got '0'"),
    (["show", "by_hand", "--set", "topk=2"], "attnsim: error: --set topk: the scenario has no [sparse] section "),
    (["show", "sparse_topk", "--set", "mask=none"],
     "attnsim: error: --set mask: expected causal with [sparse] (the indexer is causal), got none"),
])
def test_bad_topk_and_mask_are_refused_in_one_line(capsys, tmp_path, argv, line):
    code, out, err = cli(capsys, *argv)
    assert code == 2 and err.startswith(line) and err.count("\n") == 1 and "Traceback" not in err
    target = tmp_path / "t.json"
    code, _, err = cli(capsys, "export", *argv[1:], "-o", str(target))
    assert code == 2 and err.startswith(line) and not target.exists()


def test_show_prints_the_choice_and_set_topk(capsys):
    code, out, _ = cli(capsys, "show", "sparse_topk", "--step", "idx.selected", "--step", "h0.weights",
                       "--set", "topk=4")
    assert code == 0 and "idx.selected  Keys selected" in out and "1/12" in out


def test_from_arrays_takes_tensors_and_agrees_with_the_file():
    torch = pytest.importorskip("torch")
    w = LESSON["weights"]
    t = lambda m: torch.tensor(m, dtype=torch.float64)  # noqa: E731
    sc = tracer.from_arrays(t(LESSON["x"]), t(w["q"]), t(w["k"]), t(w["v"]), mask="causal", arithmetic="by-hand",
                            sparse=dict(topk=2), index_q=t(w["index_q"]), index_k=t(w["index_k"]),
                            index_w=t(w["index_w"]))
    mine, built_in = tracer.run(sc), tracer.run("sparse_topk")
    for sid in ("idx.scores", "idx.selected", "h0.weights", "h0.z"):
        np.testing.assert_array_equal(mine.rows(sid), built_in.rows(sid))
    assert sc.describe()["sparse"] == dict(topk=2, index_heads=1, d_index=1, scale=1.0)


def test_the_exports_hold_the_indexers_steps_and_check_reads_them(capsys, tmp_path):
    for fmt in ("json", "npz", "csv", "md"):
        assert cli(capsys, "export", "sparse_topk", "-o", str(tmp_path / f"t.{fmt}"))[0] == 0
    doc = json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))
    steps = {s["id"]: s for s in doc["steps"]}
    assert steps["idx.scores"]["data"][1] == [0.0, 0.0, "-inf", "-inf"]
    assert steps["idx.selected"]["inputs"] == ["idx.scores"]
    npz = np.load(tmp_path / "t.npz", allow_pickle=False)
    np.testing.assert_array_equal(npz["idx.selected"], [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 1, 0]])
    assert "idx.selected,3,2,1" in (tmp_path / "t.csv").read_text(encoding="utf-8")
    assert "## `idx.scores`" in (tmp_path / "t.md").read_text(encoding="utf-8")
    code, out, _ = cli(capsys, "check", "sparse_topk", str(tmp_path / "t.npz"))
    assert code == 0 and "idx.selected ✓" in out


# ------------------------------------------------------------------ properties, against NumPy written here

def reference(x, w_q, w_k, w_v, iq, ik, iw, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(kept, weights): the index scores Σ_h w·ReLU(q_h·k), the k best earlier keys (the earlier one
    at a tie), and the exact softmax over them."""
    n, heads = x.shape[0], iw.shape[1]
    q, key, w = (x @ iq).reshape(n, heads, -1), x @ ik, x @ iw
    index = np.array([[sum(w[t, h] * max(q[t, h] @ key[s], 0.0) for h in range(heads)) for s in range(n)]
                      for t in range(n)])
    kept = np.zeros((n, n), bool)
    for t in range(n):
        kept[t, sorted(range(t + 1), key=lambda s: (-index[t, s], s))[:k]] = True
    s = np.where(kept, (x @ w_q) @ (x @ w_k).T / math.sqrt(w_q.shape[1]), -np.inf)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return kept, e / e.sum(axis=1, keepdims=True)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 7), st.integers(1, 8), st.integers(1, 3), st.integers(0, 2**31))
def test_generated_layers_keep_at_most_k_earlier_keys_as_numpy_does(n, k, heads, seed):
    rng = np.random.default_rng(seed)
    x, w_q, w_k, w_v = rng.normal(size=(n, 3)), rng.normal(size=(3, 2)), rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    iq, ik, iw = rng.normal(size=(3, 2 * heads)), rng.normal(size=(3, 2)), rng.normal(size=(3, heads))
    sc = tracer.from_arrays(x, w_q, w_k, w_v, sparse=dict(topk=k), index_q=iq, index_k=ik, index_w=iw)
    trace = tracer.run(sc)
    kept, weights = reference(x, w_q, w_k, w_v, iq, ik, iw, k)
    np.testing.assert_allclose(tracer.attention(sc), weights @ (x @ w_v), rtol=1e-12, atol=1e-14)   # no trace
    selected = trace.rows("idx.selected") != 0
    np.testing.assert_array_equal(selected, kept)
    assert not np.triu(selected, 1).any() and (selected.sum(axis=1) <= k).all()
    np.testing.assert_allclose(trace.rows("h0.weights"), weights, rtol=1e-12, atol=1e-15)
    assert (trace.rows("h0.weights")[~selected] == 0).all()
    if k >= n:   # every earlier key kept: dense causal attention
        dense = tracer.run(tracer.from_arrays(x, w_q, w_k, w_v, mask="causal"))
        np.testing.assert_allclose(trace.rows("h0.z"), dense.rows("h0.z"), rtol=1e-12, atol=1e-15)


def test_a_large_indexer_runs_compiled_and_chooses_the_same(monkeypatch):
    """Above LARGE cells the compiled kernel scores and chooses (no heads × n × n array): the same
    scores and keys as the NumPy formula, ties at the bar included (integers make many)."""
    from tracer.mechanisms.indexer import compute
    rng = np.random.default_rng(0)   # three queries with a tie at the 3rd best
    x = rng.integers(-2, 3, size=(12, 4)).astype(float)
    keys = dict(sparse=dict(topk=3, scale=0.5), index_q=rng.integers(-1, 2, size=(4, 6)).astype(float),
                index_k=rng.integers(-1, 2, size=(4, 2)).astype(float), index_w=rng.integers(-1, 2, size=(4, 3)).astype(float))
    sc = tracer.from_arrays(x, np.eye(4)[:, :2], np.eye(4)[:, :2], np.eye(4)[:, :2], **keys)
    with pytest.warns(tracer.AttentionWarning, match="a tie at the 3rd best index score"):
        small = tracer.run(sc)
    monkeypatch.setattr(compute, "LARGE", 0)
    large = tracer.run(tracer.from_arrays(x, np.eye(4)[:, :2], np.eye(4)[:, :2], np.eye(4)[:, :2], **keys))
    np.testing.assert_allclose(large.rows("idx.scores"), small.rows("idx.scores"), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(large.rows("idx.selected"), small.rows("idx.selected"))
    assert (small.rows("idx.selected").sum(axis=1) == np.minimum(np.arange(1, 13), 3)).all()
    from tracer.mechanisms.indexer import topk
    tied = [sc.tokens[i] for i in np.flatnonzero(topk.ties(small.rows("idx.scores"), 3))]
    assert tied and small.warnings == [f"{', '.join(tied)}: a tie at the 3rd best index score; the earlier key is "
                                       "kept (torch.topk leaves that order unspecified)"]


def test_a_class_on_sparse_topk_gets_sheets_whose_choice_rests_on_no_tie(tmp_path, monkeypatch):
    """`attnsim class make sparse_topk`: every sheet is the lesson with numbers of its own, worked
    in Fractions here; no query's choice rests on how a tie is broken, and some query drops a key."""
    from tracer.classroom import printing
    from tracer.classroom.make import make_class
    monkeypatch.setattr(printing, "write_pdf", lambda path, pages: path.write_bytes(b"%PDF-"))
    folder = make_class("sparse_topk", 4, tmp_path / "class", seed=11).folder
    for student in json.loads((folder / "key.json").read_text(encoding="utf-8"))["students"]:
        doc = tomllib.loads((folder / f"{student['id']}.toml").read_text(encoding="utf-8"))
        assert doc["sparse"] == {"topk": 2} and doc["mask"] == "causal"
        got = worked(doc)
        for t, row in enumerate(got["index"]):
            ranked = sorted((v for v in row if v is not None), reverse=True)
            assert len(ranked) <= 2 or ranked[1] > ranked[2], (student["id"], t, ranked)
        assert any(len(keep) < t + 1 for t, keep in enumerate(got["keep"])), student["id"]
        cells = student["cells"]
        assert [[F(v) for v in row] for row in cells["h0.weights"]] == got["sparse"]
        assert [[int(v) for v in row] for row in cells["idx.selected"]] == \
            [[int(s in keep) for s in range(N)] for keep in got["keep"]]


def _group(svg: str, gid: str) -> str:
    """The SVG text of group `gid` (matplotlib nests no group inside these)."""
    start = svg.index(f'id="{gid}"')
    return svg[start:svg.index("</g>", start)]


@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_the_pictures_show_the_choice(capsys, tmp_path, layout):
    """heatmap of idx.scores: the 7 kept cells framed; lines: the 3 dropped keys dotted, not left out."""
    pytest.importorskip("matplotlib")
    for figure, step in (("heatmap", "idx.scores"), ("lines", "h0.weights")):
        out = tmp_path / f"{figure}.svg"
        assert cli(capsys, "export", "sparse_topk", "-o", str(out), "--figure", figure, "--step", step,
                   "--set", f"layout={layout}")[0] == 0
    kept = _group((tmp_path / "heatmap.svg").read_text(encoding="utf-8"), "idx.kept")
    assert kept.count("<path") == 7
    dropped = _group((tmp_path / "lines.svg").read_text(encoding="utf-8"), "h0.weights.dropped")
    assert dropped.count("<path") == 3 and "stroke-dasharray" in dropped


@pytest.mark.parametrize("sparse, message", [
    (dict(topk=True), r"^sparse\.topk: expected a whole number ≥ 1 \(the keys each query keeps\), got a boolean"),
    (dict(topk=2.5), r"^sparse\.topk: expected a whole number ≥ 1"),
    (dict(topk=2, scale=0), r"^sparse\.scale: expected a finite number > 0"),
    (dict(topk=2, top=3), r"^sparse\.top: unknown field"),
    (dict(topk=2, rope=dict(dims=4, style="sideways")), r"^sparse\.rope: expected \{dims"),
    (dict(topk=2, shared=dict(selected=np.eye(4), layer=-1)), r"^weights\.index_q: expected no index weights"),
])
def test_bad_sparse_keys_are_refused_naming_them(sparse, message):
    w = LESSON["weights"]
    with pytest.raises(tracer.ScenarioError, match=message):
        tracer.from_arrays(LESSON["x"], w["q"], w["k"], w["v"], sparse=sparse, index_q=w["index_q"],
                           index_k=w["index_k"])


def test_a_shared_choice_is_checked():
    w = LESSON["weights"]
    layer = lambda **shared: tracer.from_arrays(LESSON["x"], w["q"], w["k"], w["v"],  # noqa: E731
                                                sparse=dict(topk=2, shared=shared))
    with pytest.raises(tracer.ScenarioError, match=r"^sparse\.shared\.layer: expected the layer"):
        layer(selected=np.tri(4), layer=-1)
    with pytest.raises(tracer.ScenarioError, match=r"^sparse\.shared\.selected: expected a 4 × 4 matrix of 0/1"):
        layer(selected=np.full((4, 4), 2), layer=0)
    trace = tracer.run(layer(selected=np.eye(4), layer=0))   # each query keeps itself only
    np.testing.assert_array_equal(trace.rows("h0.weights"), np.eye(4))
    assert [s.id for s in trace.steps if s.id.startswith("idx.")] == ["idx.selected"]


@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_the_fused_kernels_apply_the_choice_as_the_stage_kernels_do(layout):
    rng = np.random.default_rng(2)
    t = (lambda m: np.asarray(m).T) if layout == "columns" else np.asarray   # noqa: E731
    x, w = rng.normal(size=(9, 4)), [rng.normal(size=(4, 3)) for _ in range(2)]
    sc = tracer.from_arrays(t(x), [t(m) for m in w], [t(m) for m in w], [t(m) for m in w], o=t(rng.normal(size=(6, 4))),
                            layout=layout, sparse=dict(topk=3), index_q=t(rng.normal(size=(4, 4))),
                            index_k=t(rng.normal(size=(4, 2))), index_w=t(rng.normal(size=(4, 2))))
    fused, stages = tracer.run(sc, engine="fused"), tracer.run(sc, engine="stages")
    assert fused.engine == "fused" and stages.engine == "stages"
    for sid in ("h0.masked", "h1.weights", "h1.z", "out"):
        np.testing.assert_allclose(fused[sid], stages[sid], rtol=1e-12, atol=1e-14, err_msg=sid)
    assert (fused.rows("h0.weights")[fused.rows("idx.selected") == 0] == 0).all()
    np.testing.assert_allclose(tracer.attention(sc, engine="fused"), stages["out"], rtol=1e-12, atol=1e-14)
    lazy = tracer.run(sc, lazy=True)   # heads computed when read, the choice made once before them
    np.testing.assert_allclose(lazy["h1.weights"], stages["h1.weights"], rtol=1e-12, atol=1e-14)
