"""The mechanisms of today's checkpoints together (CONTRACT §13), written by hand, against a NumPy layer
written from the papers' formulas (mechanisms_reference): QK-norm (per head and over the whole width),
rotary frequencies scaled by linear, llama3 and yarn (with its attention factor) and partial rotary,
soft-capping, ALiBi, the streaming mask and a norm of the output; both layouts, float64 and float32,
the stage and the fused paths, the online algorithm and decoding. Each mechanism alone: its own file."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tracer
from mechanisms_reference import SCALINGS, layer, reference


def columns(a: dict) -> dict:
    """The same layer written the columns way: every matrix transposed."""
    b = dict(a, x=a["x"].T, o=a["o"].T, layout="columns")
    for key in ("q", "k", "v"):
        b[key] = [w.T for w in a[key]]
    return b


def check(trace, ref: dict, tol: float) -> None:
    for sid, want in ref.items():
        assert sid in trace, sid
        np.testing.assert_allclose(trace.rows(sid), want, rtol=tol, atol=tol, err_msg=sid)


@settings(max_examples=25)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 6), shape=st.sampled_from([(1, 1), (2, 1), (2, 2), (4, 2), (4, 1)]),
       d_k=st.sampled_from([2, 4, 6]), scope=st.sampled_from(["head", "all"]), scaling=st.sampled_from(SCALINGS),
       partial=st.booleans(), cap=st.sampled_from([None, 0.7, 5.0]), alibi=st.booleans(),
       mask=st.sampled_from(["none", "causal", "sliding:2", "streaming:1:2", "streaming:0:1"]),
       layout=st.sampled_from(["rows", "columns"]), style=st.sampled_from(["half", "interleaved", None]))
def test_every_mechanism_matches_numpy(seed, n, shape, d_k, scope, scaling, partial, cap, alibi, mask, layout, style):
    rng = np.random.default_rng(seed)
    heads, groups = shape
    dims = 2 if partial and style and d_k > 2 else None
    a = layer(rng, n, heads, groups, d_k, scope=scope, scaling=scaling if style else None, dims=dims,
              softcap=cap, alibi=alibi, style=style)
    trace = tracer.run(tracer.from_arrays(**(columns(a) if layout == "columns" else a), mask=mask))
    check(trace, reference(a, mask), 1e-9)
    if layout == "columns":   # the exports' orientation: transposes of the rows
        np.testing.assert_array_equal(trace["h0.weights"], trace.rows("h0.weights").T)


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-10), ("float32", 2e-4)])
@pytest.mark.parametrize("engine", ["stages", "fused"])
def test_both_dtypes_and_engines(dtype, tol, engine):
    rng = np.random.default_rng(4)
    a = layer(rng, 9, 4, 2, 4, scope="all", scaling=SCALINGS[3], softcap=3.0, alibi=True)
    trace = tracer.run(tracer.from_arrays(**a, mask="streaming:2:3"), dtype=dtype, engine=engine)
    check(trace, reference(a, "streaming:2:3"), tol)
    assert trace.engine == "stages"   # the fused kernels neither cap nor bias: the stage path runs them


@pytest.fixture(scope="module")
def large():
    """Large enough for the fused path (heads · n² ≥ 2^20): every mechanism the fused kernels run
    (QK-norm, scaled and partial rotary positions, the streaming mask, the output's norm)."""
    rng = np.random.default_rng(8)
    return {scope: layer(rng, 512, 4, 2, 8, scope=scope, scaling=SCALINGS[2], dims=4) for scope in ("head", "all")}


@pytest.mark.parametrize("scope", ["head", "all"])
@pytest.mark.parametrize("lazy", [False, True])
def test_the_fused_path_runs_qk_norm_scaled_rotary_and_the_output_norm(large, scope, lazy):
    a = large[scope]
    sc = tracer.from_arrays(**a, mask="streaming:4:100")
    trace = tracer.run(sc, lazy=lazy)
    assert trace.engine == "fused"
    ref = reference(a, "streaming:4:100")
    for sid in ("h0.q_norm", "h3.q_rot", "h1.weights", "h3.z", "out_norm", "residual"):
        np.testing.assert_allclose(trace.rows(sid), ref[sid], rtol=1e-9, atol=1e-9, err_msg=sid)
    np.testing.assert_allclose(tracer.attention(sc), ref["residual"], rtol=1e-9, atol=1e-9)
    stages = tracer.run(sc, engine="stages", lazy=True)
    np.testing.assert_allclose(stages.rows("kv1.k_norm"), trace.rows("kv1.k_norm"), rtol=1e-12, atol=1e-12)


def test_the_steps_sit_where_the_contract_puts_them():
    rng = np.random.default_rng(1)
    a = layer(rng, 3, 2, 1, 4, scaling=SCALINGS[1], softcap=2.0, alibi=True)
    ids = [s.id for s in tracer.run(tracer.from_arrays(**a, mask="causal")).steps]
    assert ids[:6] == ["x", "freqs", "kv0.k", "kv0.k_norm", "kv0.v", "kv0.k_rot"]
    head = [i for i in ids if i.startswith("h0.")]
    assert head == ["h0.q", "h0.q_norm", "h0.q_rot", "h0.scores", "h0.scaled", "h0.capped", "h0.biased", "h0.masked",
                    "h0.exp", "h0.sums", "h0.weights", "h0.z"]
    assert ids[-4:] == ["concat", "out", "out_norm", "residual"]
    trace = tracer.run(tracer.from_arrays(**a, mask="causal"))
    assert trace.step("h0.scores").inputs == ("h0.q_rot", "kv0.k_rot")
    assert trace.step("h0.masked").inputs == ("h0.biased",)
    assert trace.step("h0.q_rot").inputs == ("h0.q_norm", "freqs")
    assert trace.step("residual").inputs == ("x", "out_norm")
    assert trace.step("freqs").axes == ("pair", "one") and trace.step("freqs").shape == (2, 1)


def test_a_layer_without_rotary_positions_has_no_rotation_steps():
    rng = np.random.default_rng(2)
    a = layer(rng, 3, 2, 2, 4, style=None)
    trace = tracer.run(tracer.from_arrays(**a))
    assert not any(s.kind in ("freqs", "q_rot", "k_rot") for s in trace.steps)
    assert trace.step("h0.scores").inputs == ("h0.q_norm", "h0.k_norm")


@pytest.mark.parametrize("engine", ["stages", "fused"])
def test_online_gives_the_standard_output_with_qk_norm_scaled_rotary_and_the_streaming_mask(engine):
    rng = np.random.default_rng(12)
    a = layer(rng, 7, 4, 2, 4, scope="all", scaling=SCALINGS[3], dims=2)
    sc = tracer.from_arrays(**a, mask="streaming:1:3")
    ref = reference(a, "streaming:1:3")
    online = tracer.run(sc, engine=engine, algorithm="online", block=3)
    for h in range(4):
        np.testing.assert_allclose(online.rows(f"h{h}.z"), ref[f"h{h}.z"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(online.rows("out_norm"), ref["out_norm"], rtol=1e-12, atol=1e-12)
    with pytest.raises(tracer.ScenarioError, match="algorithm: expected standard with softcap"):
        tracer.run(tracer.from_arrays(**a, softcap=2.0), algorithm="online")


def test_decoding_turns_each_token_by_its_scaled_frequencies_and_own_position():
    """[decode] with llama3 frequencies and positions far apart: each decoded row is the full trace's."""
    rng = np.random.default_rng(13)
    a = layer(rng, 5, 2, 1, 4, scaling=SCALINGS[2], norm=False, out_norm=False)
    a["rope"] = dict(a["rope"], positions=[0, 1, 2, 90, 300])
    del a["rope"]["offset"]
    whole = tracer.run(tracer.from_arrays(**a, mask="causal"))
    decoded = tracer.run(tracer.from_arrays(**a, decode=2))
    np.testing.assert_allclose(whole.rows("h0.weights"), reference(a)["h0.weights"], rtol=1e-12, atol=1e-12)
    for t in (2, 3, 4):
        for h in (0, 1):
            np.testing.assert_allclose(decoded.rows(f"t{t}.h{h}.weights")[0], whole.rows(f"h{h}.weights")[t, :t + 1],
                                       rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(decoded.rows(f"t{t}.residual")[0], whole.rows("residual")[t], rtol=1e-12, atol=1e-12)
    assert decoded.rows("freqs").shape == (2, 1)


def test_grouped_keys_under_the_online_algorithm_on_the_fused_path():
    """Whole groups handed to the compiled online kernel (it failed an assertion: one key head per query head)."""
    standard = tracer.run("gqa")
    online = tracer.run("gqa", engine="fused", algorithm="online", block=2)
    for h in range(4):
        np.testing.assert_allclose(online.rows(f"h{h}.z"), standard.rows(f"h{h}.z"), rtol=1e-12, atol=1e-12)
