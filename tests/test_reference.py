"""Every step of `tracer.run` against the independent NumPy reference: fixed cases over every
arithmetic key combination, each built-in scenario, and hypothesis-generated scenarios."""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import reference
import tracer
from tracer.scenario import build, scenarios_dir

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

SCALES = ["sqrt", "floor", "none", 2.5]
BASES = ["e", 3.0, 2.5]


def _orient(m, columns):
    """A rows-orientation matrix (or a stack, one per head) as the columns layout writes it."""
    m = np.asarray(m, dtype=np.float64)
    return (m.swapaxes(-1, -2) if columns else m).copy()


def fixed_case(layout: str, heads: int = 2, with_o: bool = True) -> dict:
    """4 tokens, d_model 3, d_k 3 (⌊s ÷ 2⌋), d_v 2: small integers, so ⌊·⌋ meets no rounding edge."""
    rng = np.random.default_rng(7)
    cols = layout == "columns"
    x = rng.integers(-2, 3, size=(4, 3))
    w = {key: rng.integers(-1, 2, size=(heads, 3, 3 if key != "v" else 2)) for key in "qkv"}
    case = dict(layout=layout, x=_orient(x, cols), **{key: _orient(m, cols) for key, m in w.items()})
    if with_o:
        case["o"] = _orient(rng.integers(-1, 2, size=(heads * 2, 5)), cols)
    return case


def _arrays(case: dict) -> dict:
    return {k: case[k] for k in ("x", "q", "k", "v", "o", "v_down", "v_up") if case.get(k) is not None}


def reference_for(case: dict, **keys) -> dict:
    """The reference's steps for one case under the exact preset with `keys` changed."""
    return reference.attention(**_arrays(case), layout=case["layout"], mask=case.get("mask", "none"),
                               scale=keys.get("scale", "sqrt"), base=keys.get("softmax_base", "e"),
                               normalize=keys.get("normalize", "softmax"), stable=keys.get("stable", True),
                               dtype=keys.get("dtype", "float64"), residual=case.get("residual"))


def trace_for(case: dict, builder: str = "from_arrays", lazy=None, **keys):
    """The tracer's trace for one case, its scenario made by `from_arrays` or by the dict builder."""
    arrays_, mask = _arrays(case), case.get("mask", "none")
    if builder == "from_arrays":
        sc = tracer.from_arrays(**arrays_, layout=case["layout"], mask=mask, residual=case.get("residual"))
    else:  # the dict a TOML file gives: nested lists
        as_list = lambda m: [np.asarray(h).tolist() for h in m] if isinstance(m, list) else np.asarray(m).tolist()  # noqa: E731
        data = {"layout": case["layout"], "x": as_list(arrays_.pop("x")),
                "weights": {k: as_list(m) for k, m in arrays_.items()},
                "mask": mask if isinstance(mask, str) else np.asarray(mask, dtype=int).tolist()}
        if case.get("residual"):
            data["residual"] = case["residual"]
        sc = build(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tracer.AttentionWarning)
        return tracer.run(sc, "exact", lazy=lazy, **keys)


def run_both(case: dict, builder: str = "from_arrays", lazy=None, **keys):
    return trace_for(case, builder, lazy, **keys), reference_for(case, **keys)


# ------------------------------------------------------------------ fixed cases

@pytest.mark.parametrize("layout", ["rows", "columns"])
@pytest.mark.parametrize("mask", ["none", "causal", "explicit"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_every_arithmetic_combination(layout, mask, dtype):
    case = fixed_case(layout)
    if mask == "explicit":  # token 2 sees nothing (a fully masked query), others a pattern
        m = np.array([[1, 0, 1, 0], [0, 0, 0, 0], [1, 1, 0, 1], [0, 1, 1, 1]])
        case["mask"] = m.T if layout == "columns" else m
    else:
        case["mask"] = mask
    for scale, base, normalize, stable in itertools.product(SCALES, BASES, ["softmax", "relu"], [True, False]):
        keys = dict(scale=scale, softmax_base=base, normalize=normalize, stable=stable, dtype=dtype)
        trace, ref = run_both(case, **keys)
        reference.assert_matches(trace, ref, dtype)


@pytest.mark.parametrize("layout", ["rows", "columns"])
@pytest.mark.parametrize("heads,with_o", [(1, False), (1, True), (3, False), (3, True), (8, True)])
def test_heads_and_output_projection(layout, heads, with_o):
    trace, ref = run_both(fixed_case(layout, heads, with_o))
    reference.assert_matches(trace, ref)


@pytest.mark.parametrize("layout", ["rows", "columns"])
@pytest.mark.parametrize("norm", ["layer", "none"])
def test_residual_and_low_rank(layout, norm):
    cols = layout == "columns"
    rng = np.random.default_rng(3)
    x = rng.normal(size=(5, 4))
    case = dict(layout=layout, x=_orient(x, cols), q=_orient(rng.normal(size=(2, 4, 3)), cols),
                k=_orient(rng.normal(size=(2, 4, 3)), cols), v_down=_orient(rng.normal(size=(2, 4, 1)), cols),
                v_up=_orient(rng.normal(size=(2, 1, 2)), cols), o=_orient(rng.normal(size=(4, 4)), cols),
                residual={"norm": norm, "eps": 1e-3}, mask="causal")
    for dtype in ("float64", "float32"):
        trace, ref = run_both(case, dtype=dtype)
        reference.assert_matches(trace, ref, dtype)


def test_low_rank_value_map_is_the_full_product():
    """V from the low-rank pair equals V from W_V = W_V↓·W_V↑ (rows layout)."""
    rng = np.random.default_rng(5)
    x, q, k = rng.normal(size=(3, 4)), rng.normal(size=(4, 2)), rng.normal(size=(4, 2))
    down, up = rng.normal(size=(4, 1)), rng.normal(size=(1, 3))
    low = tracer.run(tracer.from_arrays(x=x, q=q, k=k, v_down=down, v_up=up))
    full = tracer.run(tracer.from_arrays(x=x, q=q, k=k, v=down @ up))
    np.testing.assert_allclose(low["h0.z"], full["h0.z"], rtol=1e-12)


def test_overrides_layout_and_mask():
    """`layout` and `mask` given as arithmetic keys override the scenario's."""
    case = fixed_case("rows")
    m = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]])
    sc = tracer.from_arrays(x=case["x"], q=list(case["q"]), k=list(case["k"]), v=list(case["v"]), o=case["o"])
    trace = tracer.run(sc, layout="columns", mask=m.T.tolist())  # written key × query, as columns
    ref = reference.attention(*(_orient(case[key], True) for key in ("x", "q", "k", "v", "o")),
                              layout="columns", mask=m.T)
    reference.assert_matches(trace, ref)


def _file_arrays(data: dict) -> dict:
    """x and the weights exactly as a scenario file writes them, read without the package."""
    w = data["weights"]
    out = {"x": np.array(data["x"], dtype=float)}
    for key in ("q", "k", "v", "o", "v_down", "v_up"):
        if key in w:
            out[key] = np.array(w[key], dtype=float)
    return out


V2_BUILTINS = ("biases", "keys_as_values", "gqa", "mqa", "rope", "cross_attention", "sliding_window")
MECHANISM_BUILTINS = ("qk_norm", "softcap", "alibi", "streaming", "rope_scaling", "rope_scaling_plain",
                      "rope_scaling_linear", "rope_scaling_yarn", "sinks", "mla")   # mechanisms/test_sinks.py, test_latent.py
# v4's lessons, each checked cell by cell against Fractions written in its own test: the linear ones in
# mechanisms/test_linear.py and test_output_gate.py, the dense ones in test_dense2026_lessons.py, the
# indexer's in mechanisms/test_indexer.py (this reference has no state, no chunks and no choice of keys)
V4_BUILTINS = ("delta_rule", "linear_decay", "gated_attention", "chunked", "kv_sharing", "no_scale", "sparse_topk")


@pytest.mark.parametrize("name", tracer.builtin_names())
@pytest.mark.parametrize("preset", ["exact", "by-hand"])
def test_builtin_scenarios(name, preset):
    path = scenarios_dir() / f"{name}.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    if "random" in data:
        pytest.skip("generated inputs (large): the [random] section is covered by test_random_section")
    if "model" in data:
        pytest.skip("a real checkpoint's layer: checked against transformers in test_models and test_induction_model")
    if name in V2_BUILTINS:
        pytest.skip("a layer of CONTRACT §8: checked against PyTorch SDPA in test_layer_against_pytorch")
    if name in MECHANISM_BUILTINS:
        pytest.skip("a mechanism of CONTRACT §13: checked against NumPy in mechanisms/test_builtins.py")
    if name in V4_BUILTINS:
        pytest.skip("a lesson of CONTRACT §16–§18: checked against Fractions in its mechanism's own tests")
    if "decode" in data:
        pytest.skip("KV-cache decoding: its rows are checked against full causal traces in test_decode")
    sc = tracer.load_scenario(name)
    keys = {**reference.PRESETS[preset]}
    for key, value in data.get("defaults", {}).items():  # the file's own arithmetic defaults
        keys["base" if key == "softmax_base" else key] = value
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tracer.AttentionWarning)
        trace = tracer.run(sc, preset)
    online = keys.pop("algorithm", "standard") == "online"
    keys.pop("block", None)
    ref = reference.attention(**_file_arrays(data), layout=data.get("layout", "rows"),
                              mask=data.get("mask", "none"), residual=data.get("residual"), **keys)
    if online:   # no n × n steps to compare: the heads' outputs must be the reference's
        for h in range(sc.heads):
            np.testing.assert_allclose(trace[f"h{h}.z"], ref[f"h{h}.z"], rtol=1e-12, atol=1e-12)
        return
    reference.assert_matches(trace, ref, keys["dtype"])


@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_random_section(layout):
    """A small [random] scenario: the reference is fed the generated arrays, as the file's layout writes them."""
    spec = dict(seed=11, tokens=5, d_model=6, heads=2, d_k=3, d_v=2, output=True, d_out=4)
    sc = build({"layout": layout, "mask": "causal", "random": spec})
    cols = layout == "columns"
    assert (sc.n, sc.d_model, sc.heads, sc.d_k, sc.d_v, sc.d_out) == (5, 6, 2, 3, 2, 4)
    trace = tracer.run(sc)
    ref = reference.attention(_orient(sc.x, cols), _orient(sc.w_q, cols), _orient(sc.w_k, cols),
                              _orient(sc.w_v, cols), _orient(sc.w_o, cols), layout=layout, mask="causal")
    reference.assert_matches(trace, ref)


# ------------------------------------------------------------------ generated cases

DYADIC = st.sampled_from([i / 4 for i in range(-4, 5)])  # exact sums: ⌊·⌋ never sits on a rounding edge
REAL = st.floats(-1, 1, allow_nan=False, width=64)


@st.composite
def cases(draw):
    layout = draw(st.sampled_from(["rows", "columns"]))
    cols = layout == "columns"
    n, d_model = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    heads, d_k, d_v = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    keys = dict(scale=draw(st.sampled_from(["sqrt", "floor", "none", 2.0, 1.5])),
                softmax_base=draw(st.sampled_from(["e", 2.0, 3.0])),
                normalize=draw(st.sampled_from(["softmax", "relu"])), stable=draw(st.booleans()),
                dtype=draw(st.sampled_from(["float64", "float32"])))
    values = DYADIC if keys["scale"] == "floor" or draw(st.booleans()) else REAL
    mat = lambda *shape: draw(arrays(np.float64, shape, elements=values))  # noqa: E731
    orient = lambda m: _orient(m, cols)  # noqa: E731
    case = dict(layout=layout, x=orient(mat(n, d_model)), q=orient(mat(heads, d_model, d_k)),
                k=orient(mat(heads, d_model, d_k)))
    if draw(st.booleans()):
        rank = draw(st.integers(1, 3))
        case["v_down"], case["v_up"] = orient(mat(heads, d_model, rank)), orient(mat(heads, rank, d_v))
    else:
        case["v"] = orient(mat(heads, d_model, d_v))
    residual = draw(st.sampled_from([None, {"norm": "layer", "eps": 1e-5}, {"norm": "none"}]))
    if (residual and heads * d_v != d_model) or draw(st.booleans()):
        d_out = d_model if residual else draw(st.integers(1, 5))
        case["o"] = orient(mat(heads * d_v, d_out))
    case["residual"] = residual
    kind = draw(st.sampled_from(["none", "causal", "explicit"]))
    case["mask"] = kind if kind != "explicit" else draw(arrays(np.int64, (n, n), elements=st.integers(0, 1)))
    if heads == 1 and draw(st.booleans()):  # one matrix instead of a list of one
        for key in ("q", "k", "v", "v_down", "v_up"):
            if key in case:
                case[key] = case[key][0]
    else:
        for key in ("q", "k", "v", "v_down", "v_up"):
            if key in case:
                case[key] = list(case[key])
    return case, keys


@settings(max_examples=250)
@given(cases(), st.sampled_from(["from_arrays", "build"]), st.sampled_from([None, True]))
def test_generated(case_keys, builder, lazy):
    case, keys = case_keys
    ref = reference_for(case, **keys)
    big = max(np.abs(a[np.isfinite(a)]).max(initial=0) for a in ref.values())
    assume(big < np.finfo(keys["dtype"]).max / 100)  # overflow is tested on its own, in test_trace
    trace = trace_for(case, builder, lazy, **keys)
    if lazy:  # compute on demand, last head first, so that heads are evicted and recomputed
        for step in reversed(trace.steps):
            trace[step.id]
    reference.assert_matches(trace, ref, keys["dtype"])
