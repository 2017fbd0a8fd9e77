"""The trace's structure (CONTRACT §4: ids, order, axes, shapes, inputs), its accessors, lazy
computation, fully masked queries and overflow errors."""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import reference
import tracer

CONTRACT_AXES = {"token", "query", "key", "d_model", "d_k", "d_v", "d_out", "one"}
# rows-layout axes of each kind; the columns layout reverses them
AXES = {"x": ("token", "d_model"), "q": ("token", "d_k"), "k": ("token", "d_k"), "v": ("token", "d_v"),
        "scores": ("query", "key"), "scaled": ("query", "key"), "masked": ("query", "key"),
        "exp": ("query", "key"), "sums": ("query", "one"), "weights": ("query", "key"),
        "z": ("token", "d_v"), "out": ("token", "d_out"), "residual": ("token", "d_model"),
        "norm": ("token", "d_model")}


def scenario(layout="rows", heads=2, mask="none", with_o=True, low_rank=False, residual=None, seed=0):
    """n = 5, d_model = 4, d_k = 3, d_v = 2, rank 1; d_out = 4 (= d_model, so a residual fits)."""
    rng = np.random.default_rng(seed)
    t = (lambda m: m.swapaxes(-1, -2).copy()) if layout == "columns" else (lambda m: m)
    w = lambda *shape: t(rng.normal(size=shape))  # noqa: E731
    kw = dict(x=t(rng.normal(size=(5, 4))), q=list(w(heads, 4, 3)), k=list(w(heads, 4, 3)))
    if low_rank:
        kw.update(v_down=list(w(heads, 4, 1)), v_up=list(w(heads, 1, 2)))
    else:
        kw["v"] = list(w(heads, 4, 2))
    if with_o:
        kw["o"] = w(heads * 2, 4)
    return tracer.from_arrays(**kw, layout=layout, mask=mask, residual=residual), kw


CONFIGS = [c for c in itertools.product(["rows", "columns"], [1, 3], ["none", "causal"], [False, True],
                                        [False, True], [None, {"norm": "layer"}, {"norm": "none"}],
                                        ["softmax", "relu"])
           if c[3] or not c[5]]  # a residual needs W_O here (heads·d_v ≠ d_model)


@pytest.mark.parametrize("layout,heads,mask,with_o,low_rank,residual,normalize", CONFIGS)
def test_steps_ids_order_axes_shapes_inputs(layout, heads, mask, with_o, low_rank, residual, normalize):
    sc, _ = scenario(layout, heads, mask, with_o, low_rank, residual)
    trace = tracer.run(sc, normalize=normalize)
    ids = [s.id for s in trace.steps]
    assert ids == reference.expected_ids(heads, masked=mask != "none", softmax=normalize == "softmax",
                                         low_rank=low_rank, has_o=with_o, residual=residual)
    size = dict(token=5, query=5, key=5, d_model=4, d_k=3, d_v=2, d_out=4, one=1, rank=1)
    previous = []
    for step in trace.steps:
        want = ("token", "rank") if step.kind == "v_down" else AXES.get(step.kind, ("token", "d_v"))
        if layout == "columns":
            want = want[::-1]
        assert step.axes == want, step.id
        assert set(step.axes) <= CONTRACT_AXES | {"rank"}
        shape = tuple(size[a] for a in step.axes)
        if step.kind == "concat":  # heads·d_v columns (rows layout)
            shape = (5, heads * 2) if layout == "rows" else (heads * 2, 5)
        assert step.shape == shape == trace[step.id].shape, step.id
        assert set(step.inputs) <= set(previous), f"{step.id} reads a step not computed before it"
        assert step.title and step.why and isinstance(step.formula, str) and step.formula
        assert (step.head is None) == (not step.id.startswith("h")), step.id
        previous.append(step.id)
    p = "h0."
    inputs = {s.id: list(s.inputs) for s in trace.steps}
    assert inputs["x"] == [] and inputs[p + "q"] == ["x"] and inputs[p + "k"] == ["x"]
    assert inputs[p + "v"] == ([p + "v_down"] if low_rank else ["x"])
    assert inputs[p + "scores"] == [p + "q", p + "k"]
    last = p + ("masked" if mask != "none" else "scaled")
    if normalize == "softmax":
        assert inputs[p + "exp"] == [last] and inputs[p + "sums"] == [p + "exp"]
        assert inputs[p + "weights"] == [p + "exp", p + "sums"]
    else:
        assert inputs[p + "weights"] == [last]
    assert inputs[p + "z"] == [p + "weights", p + "v"]
    if heads > 1:
        assert inputs["concat"] == [f"h{h}.z" for h in range(heads)]
    if with_o:
        assert inputs["out"] == ["concat" if heads > 1 else "h0.z"]


@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_accessors(layout):
    sc, kw = scenario(layout, heads=2)
    trace = tracer.run(sc)
    assert trace.layout == layout and trace.heads == 2 and trace.scenario is sc
    for step in trace.steps:
        a = trace[step.id]
        assert trace.rows(step.id).shape == (a.T.shape if layout == "columns" else a.shape)
        np.testing.assert_array_equal(trace.rows(step.id), a.T if layout == "columns" else a)
    for name in ("q", "k", "v"):
        for h in range(2):
            np.testing.assert_array_equal(trace.weight(name, h), kw[name][h])
    np.testing.assert_array_equal(trace.weight("o"), kw["o"])
    np.testing.assert_array_equal(trace["x"], kw["x"])
    with pytest.raises(tracer.ScenarioError):
        trace["h7.q"]


def test_float32_arrays_are_float32():
    trace = tracer.run(scenario()[0], dtype="float32")
    assert all(trace[s.id].dtype == np.float32 for s in trace.steps)


@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_lazy_equals_eager_in_any_order(layout):
    sc, _ = scenario(layout, heads=4, mask="causal", residual={"norm": "layer"})
    eager = tracer.run(sc)
    lazy = tracer.run(sc, lazy=True)
    order = [s.id for s in eager.steps]
    for step_id in order[::-1] + order[::3] + order:  # evicts heads and computes them again
        np.testing.assert_array_equal(lazy[step_id], eager[step_id], err_msg=step_id)


def test_a_lazy_trace_computes_each_head_once(monkeypatch):
    """compute_all on a lazy trace: each head once, the output from the z every head keeps when
    its other steps are let go (not each evicted head computed again for the output)."""
    from tracer import compute
    sc, _ = scenario(heads=4, mask="causal", residual={"norm": "layer"})
    ran, stage_head = [], compute.stage_head
    monkeypatch.setattr(compute, "stage_head", lambda run, h: ran.append(h) or stage_head(run, h))
    lazy = tracer.run(sc, lazy=True, engine="stages").compute_all()
    assert ran == [0, 1, 2, 3]
    np.testing.assert_array_equal(lazy["residual"], tracer.run(sc, engine="stages")["residual"])


@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_weights_add_up_to_one_and_masked_cells(layout):
    sc, _ = scenario(layout, heads=1, mask="causal")
    trace = tracer.run(sc)
    key_axis = 0 if layout == "columns" else 1
    np.testing.assert_allclose(trace["h0.weights"].sum(axis=key_axis), 1.0, rtol=1e-12)
    ahead = ~np.tri(5, dtype=bool)  # query × key: keys after the query
    if layout == "columns":
        ahead = ahead.T
    assert np.isneginf(trace["h0.masked"][ahead]).all() and np.isfinite(trace["h0.masked"][~ahead]).all()
    assert (trace["h0.exp"][ahead] == 0).all() and (trace["h0.weights"][ahead] == 0).all()


def test_stable_and_raw_powers_give_the_same_weights():
    sc, _ = scenario(heads=2, mask="causal")
    stable, raw = tracer.run(sc, stable=True), tracer.run(sc, stable=False)
    for h in range(2):
        np.testing.assert_allclose(stable[f"h{h}.weights"], raw[f"h{h}.weights"], rtol=1e-12, atol=1e-15)
        np.testing.assert_array_equal(stable[f"h{h}.exp"].max(axis=1), 1.0)  # e^(s − max): the max is e^0


@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_fully_masked_query_gets_zero_weights_and_a_warning(layout):
    allowed = np.array([[1, 0, 0, 0, 0], [0, 0, 0, 0, 0], [1, 1, 1, 0, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]])
    sc, _ = scenario(layout, heads=1, mask=allowed.T if layout == "columns" else allowed)
    with pytest.warns(tracer.AttentionWarning, match="t2, t4"):
        trace = tracer.run(sc)
    assert len(trace.warnings) == 1 and "t2" in trace.warnings[0] and "t4" in trace.warnings[0]
    for stable in (True, False):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", tracer.AttentionWarning)
            t = tracer.run(sc, stable=stable)
        w, z = t.rows("h0.weights"), t.rows("h0.z")
        assert (w[[1, 3]] == 0).all() and (z[[1, 3]] == 0).all() and (t.rows("h0.sums")[[1, 3]] == 0).all()
        np.testing.assert_allclose(w[[0, 2, 4]].sum(axis=1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("dtype,score", [("float64", 800.0), ("float32", 100.0)])
def test_raw_powers_that_overflow_are_an_error_naming_the_step(dtype, score):
    sc = tracer.from_arrays(x=[[1.0], [0.5]], q=[[1.0]], k=[[score]], v=[[1.0]])
    with pytest.raises(tracer.ScenarioError, match=r"h0\.exp"):
        tracer.run(sc, scale="none", stable=False, dtype=dtype)
    tracer.run(sc, scale="none", stable=True, dtype=dtype)  # subtracting the max avoids it


def test_sums_that_overflow_are_an_error():
    # e^88 fits float32 (max ≈ 3.4e38) but three of them do not
    sc = tracer.from_arrays(x=[[1.0], [1.0], [1.0]], q=[[1.0]], k=[[88.0]], v=[[1.0]])
    with pytest.raises(tracer.ScenarioError, match=r"h0\.(exp|sums)"):
        tracer.run(sc, scale="none", stable=False, dtype="float32")


def test_raw_powers_that_all_underflow_are_not_zero_weights():
    sc = tracer.from_arrays(x=[[1.0], [1.0]], q=[[1.0]], k=[[-800.0]], v=[[1.0]])
    try:
        trace = tracer.run(sc, scale="none", stable=False)
    except tracer.ScenarioError as err:  # an error naming the step is fine too
        assert "h0.exp" in str(err)
    else:
        np.testing.assert_allclose(trace["h0.weights"].sum(axis=1), 1.0)
