"""Exports (CONTRACT §5): json, npz and csv hold identical numbers; json is strict; md is a worksheet."""
import csv
import json

import numpy as np
import pytest

import tracer
from tracer.export import write_export

AXES = {"token", "query", "key", "d_model", "d_k", "d_v", "d_out", "one", "rank"}


def _strict_load(path):
    def refuse(name):
        raise AssertionError(f"non-standard JSON constant {name}")
    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


def _from_json(value):
    return {"-inf": -np.inf, "inf": np.inf, "nan": np.nan}.get(value, value)


def _causal_trace(dtype="float64"):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(5, 6))
    q, k, v = ([rng.normal(size=(6, 3)) for _ in range(2)] for _ in range(3))
    o = rng.normal(size=(6, 4))
    return tracer.run(tracer.from_arrays(x, q, k, v, o, mask="causal", tokens=list("abcde")), dtype=dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("make", [lambda dt: tracer.run("by_hand", dtype=dt), _causal_trace], ids=["by_hand", "causal"])
def test_json_npz_csv_hold_identical_numbers(tmp_path, make, dtype):
    trace = make(dtype)
    for ext in ("json", "npz", "csv"):
        write_export(trace, tmp_path / f"t.{ext}")
    doc = _strict_load(tmp_path / "t.json")
    with np.load(tmp_path / "t.npz", allow_pickle=False) as z:
        npz = {key: z[key] for key in z.files}
    cells = {}
    with open(tmp_path / "t.csv", newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            cells.setdefault(row["step"], {})[(int(row["row"]), int(row["col"]))] = float(row["value"])
    assert [s["id"] for s in doc["steps"]] == [s.id for s in trace.steps]
    given = {f"given/{g['name']}" for g in doc["given"]}   # the inputs and weights beside the steps
    assert set(npz) == {s.id for s in trace.steps} | {"__meta__"} | given
    for step in doc["steps"]:
        sid = step["id"]
        from_json = np.array([[_from_json(v) for v in row] for row in step["data"]], dtype=np.float64)
        from_csv = np.full(step["shape"], np.nan)
        for (r, c), value in cells[sid].items():
            from_csv[r, c] = value
        expected = trace[sid].astype(np.float64)
        assert list(from_json.shape) == step["shape"] == list(npz[sid].shape)
        assert npz[sid].dtype == np.dtype(dtype)
        for got in (from_json, npz[sid].astype(np.float64), from_csv):
            np.testing.assert_array_equal(got, expected)  # bit for bit, infinities included


def test_json_document_follows_the_schema(tmp_path):
    trace = _causal_trace()
    write_export(trace, tmp_path / "t.json")
    doc = _strict_load(tmp_path / "t.json")
    assert doc["schema"] == "attnsim.trace/1"
    assert {"name", "title", "tokens", "layout", "heads"} <= set(doc["scenario"])
    assert doc["scenario"]["tokens"] == list("abcde") and doc["scenario"]["heads"] == 2
    assert doc["arithmetic"]["scale"] == "sqrt" and doc["arithmetic"]["mask"] == "causal"
    for step in doc["steps"]:
        assert {"id", "title", "formula", "inputs", "axes", "shape", "data"} <= set(step)
        assert set(step["axes"]) <= AXES
    masked = next(s for s in doc["steps"] if s["id"] == "h0.masked")
    assert masked["data"][0][1] == "-inf" and masked["data"][1][0] != "-inf"
    ids = [s["id"] for s in doc["steps"]]
    assert ids.index("concat") < ids.index("out") == len(ids) - 1


def test_npz_meta_is_the_json_without_data(tmp_path):
    trace = tracer.run("by_hand")
    write_export(trace, tmp_path / "t.npz")
    write_export(trace, tmp_path / "t.json")
    with np.load(tmp_path / "t.npz", allow_pickle=False) as z:
        meta = json.loads(str(z["__meta__"]))
    doc = _strict_load(tmp_path / "t.json")
    for entry in doc["steps"] + doc["given"]:
        del entry["data"]
    assert meta == doc


def test_columns_layout_arrays_are_key_by_query(tmp_path):
    trace = tracer.run("by_hand")
    write_export(trace, tmp_path / "t.json")
    steps = {s["id"]: s for s in _strict_load(tmp_path / "t.json")["steps"]}
    assert steps["h0.weights"]["axes"] == ["key", "query"] and steps["h0.sums"]["shape"] == [1, 4]
    # each query's column of weights sums to 1 in the columns layout
    np.testing.assert_allclose(np.array(steps["h0.weights"]["data"]).sum(axis=0), 1.0)


def test_worksheet_has_every_step_with_formula_and_fractions(tmp_path):
    trace = tracer.run("by_hand")
    write_export(trace, tmp_path / "w.md")
    text = (tmp_path / "w.md").read_text(encoding="utf-8")
    for step in trace.steps:
        assert f"## `{step.id}`" in text and step.formula in text
    assert "| **x2** | 27/46 | 9/28 | 3/22 | 3/4 |" in text  # the worksheet's key-k2 row of weights


def test_text_exports_too_large_are_refused_before_writing(tmp_path, monkeypatch):
    from tracer import export
    monkeypatch.setitem(export.TEXT_CELLS, "json", 10)  # by_hand holds far more than 10 numbers
    target = tmp_path / "t.json"
    with pytest.raises(tracer.ScenarioError, match="expected npz, or fewer steps"):
        write_export(tracer.run("by_hand"), target)
    assert list(tmp_path.iterdir()) == []
    write_export(tracer.run("by_hand"), target, steps=["h0.sums"])  # 4 numbers: fine
    assert _strict_load(target)["steps"][0]["id"] == "h0.sums"
