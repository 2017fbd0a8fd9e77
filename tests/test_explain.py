"""`trace.explain` tells each cell's arithmetic with the actual numbers, ending on the cell's value;
`trace.sources` names cells in range that reproduce it."""
from __future__ import annotations

import math
import re
import warnings
from fractions import Fraction

import numpy as np
import pytest

import tracer
import v4_layer
from tracer.ids import parse
from tracer.scenario import scenarios_dir

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


@pytest.fixture(scope="module")
def by_hand():
    return tracer.run("by_hand")


def test_worksheet_cells_are_told_with_their_numbers(by_hand):
    t = by_hand  # columns layout: row = key, column = query
    assert t.explain("h0.scores", 1, 2) == "h0.scores[key x2, query x3] = k(x2)·q(x3) = 2×0 + 1×1 + 0×2 = 1"
    assert "⌊4 ÷ 2⌋ = 2" in t.explain("h0.scaled", 1, 0)
    assert "3^2 = 9" in t.explain("h0.exp", 1, 0)
    assert "9 ÷ (46/3) = 27/46 ≈ 0.5870   " in t.explain("h0.weights", 1, 0)
    assert "3 + 9 + 1/3 + 3 = 46/3" in t.explain("h0.sums", 0, 0)
    # z's first feature for x1: 20 (v1) and 20 (v4) weighted 9/46 each, v2 and v3 add nothing
    assert "20×9/46 + 0×27/46 + 0×1/46 + 20×9/46 = 180/23" in t.explain("h0.z", 0, 0)
    assert "⌊−1 ÷ 2⌋ = −1" in t.explain("h0.scaled", 2, 0)


def significant(text: str) -> int:
    """Significant digits of a decimal as written (trailing zeros count: 0.5870 has four)."""
    mantissa = text.replace("−", "").split("e")[0].replace(".", "").lstrip("0")
    return len(mantissa)


@pytest.mark.parametrize("name", ["by_hand", "alibi", "sinks", "mla", "multi_head", "rope_scaling", "rope_scaling_yarn"])
def test_every_decimal_of_an_explanation_has_four_significant_digits(name):
    """As the README promises: a fraction's decimal (27/46 ≈ 0.5870) and the scaled frequencies'
    share of the way moved are the fraction rounded to 4 digits, not 3."""
    trace = tracer.run(name)
    for step in trace.steps:
        rows, cols = step.shape
        for r in range(rows):
            for c in range(cols):
                story = trace.explain(step.id, r, c)
                for num, den, approx in re.findall(r"(\d+)/(\d+) ≈ (\S+)", story):
                    want = float(Fraction(int(num), int(den)))   # 4 digits; a rounded one keeps its zeros
                    written = f"{want:.4g}" if float(f"{want:.4g}") == want else f"{want:#.4g}"
                    assert approx == written.replace("-", "−"), story
                for moved in re.findall(r"moved (\S+) of the way", story):
                    assert significant(moved) == 4, story


def test_decimals_when_fractions_are_off(by_hand):
    text = by_hand.explain("h0.weights", 1, 0, fractions=False)
    assert "27/46" not in text and "0.587" in text


def test_cell_out_of_range_is_bad_input(by_hand):
    for row, col in ((4, 0), (0, 4), (-1, 0)):
        with pytest.raises(tracer.ScenarioError):
            by_hand.explain("h0.scores", row, col)
    with pytest.raises(tracer.ScenarioError):
        by_hand.explain("h0.nothing", 0, 0)


def shown_value(text: str, fraction_tol: float = 1e-9):
    """The number an explanation ends on (before a trailing comment): Fraction or float, and its rtol."""
    body = text.split("   (")[0]
    last = body.rsplit(" = ", 1)[1].split(" ≈ ")[0].replace("−", "-").replace("∞", "inf")
    if "/" in last:
        return Fraction(last), fraction_tol
    return float(last), 5.001e-4  # decimals carry 4 significant digits (1 may stand for 0.9999999999999999)


def test_float32_values_are_not_shown_as_unrelated_fractions():
    sc = tracer.from_arrays(x=[[0.2097, 0.61]], q=[[1.0], [1.0]], k=[[1.0], [1.0]], v=[[1.0], [1.0]])
    trace = tracer.run(sc, dtype="float32")
    for col in (0, 1):  # 0.2097 came out as 147/701 (4e-7 away: 28 float32 steps)
        value, _ = shown_value(trace.explain("x", 0, col))
        if isinstance(value, Fraction):
            assert np.float32(float(value)) == trace["x"][0, col]


def small_builtins() -> list[str]:
    names = []
    for name in tracer.builtin_names():
        data = tomllib.loads((scenarios_dir() / f"{name}.toml").read_text(encoding="utf-8"))
        if "random" not in data:  # generated ones are too large to explain cell by cell
            names.append(name)
    return names


def generated() -> list[tuple[str, object, dict]]:
    """Scenarios that reach every step kind and option (relu, low rank, residual, masks, float32)."""
    rng = np.random.default_rng(1)
    r = lambda *shape: rng.normal(size=shape).round(2)  # noqa: E731
    hidden = np.array([[1, 0, 0], [0, 0, 0], [1, 1, 1]])  # the second query sees nothing
    three = tracer.from_arrays(x=r(3, 4), q=list(r(3, 4, 2)), k=list(r(3, 4, 2)), v=list(r(3, 4, 2)), o=r(6, 4),
                               mask=hidden, residual={"norm": "layer"})
    low = tracer.from_arrays(x=r(3, 4).T, q=r(2, 4), k=r(2, 4), v_down=r(1, 4), v_up=r(3, 1),
                             layout="columns", mask="causal")
    return [("three heads, residual, norm", three, {}),
            ("three heads, relu", three, dict(normalize="relu", scale="none")),
            ("three heads, float32, raw base 2", three, dict(dtype="float32", stable=False, softmax_base=2, scale=1.5)),
            ("low rank, columns", low, {}),
            ("low rank, by-hand", low, dict(scale="floor", softmax_base=3, stable=False))]


def with_norm_in() -> list:
    """A real model's layer: a norm with learned gain and bias first, then biased projections."""
    rng = np.random.default_rng(5)
    cases = []
    for kind in ("layer", "rms"):
        sc = tracer.from_arrays(rng.normal(size=(4, 6)), [rng.normal(size=(6, 2))] * 2, rng.normal(size=(6, 2)),
                                rng.normal(size=(6, 2)), o=rng.normal(size=(4, 6)), bq=rng.normal(size=2),
                                bo=rng.normal(size=6), mask="causal", residual=dict(norm="none"),
                                norm_in=dict(kind=kind, gain=rng.normal(size=6), bias=rng.normal(size=6), eps=1e-5))
        cases.append((f"norm_in {kind}", sc, {}))
    return cases


def with_mechanisms() -> list:
    """Today's checkpoints' parts no built-in has together: QK-norm over every head's width,
    grouped keys, partial rotary scaled by yarn, a norm of the output; the values' norm."""
    rng = np.random.default_rng(6)
    r = lambda *shape: rng.normal(size=shape).round(2)  # noqa: E731
    sc = tracer.from_arrays(r(4, 6), list(r(4, 6, 4)), list(r(2, 6, 4)), list(r(2, 6, 4)), o=r(16, 6),
                            q_norm=list(r(4, 4)), k_norm=list(r(2, 4)), qk_norm_scope="all", mask="streaming:1:2",
                            rope=dict(base=50.0, dims=2, scaling=dict(type="yarn", factor=4.0,
                                                                      original_max_position_embeddings=8)),
                            out_norm=dict(gain=r(6), eps=1e-6), residual=dict(norm="none"), softcap=3.0)
    latent = tracer.from_arrays(r(4, 6), mla=dict(down=r(6, 3), rope_k=r(6, 2), up_k=list(r(2, 3, 2)), up_v=list(r(2, 3, 2)),
                                                  q_down=r(6, 4), q_norm=r(4), kv_norm=r(3), q=list(r(2, 4, 2)),
                                                  rope_q=list(r(2, 4, 2))), o=r(4, 6), residual=dict(norm="none"),
                                mask="causal", rope=dict(base=50.0, scaling=dict(type="yarn", factor=4.0,
                                                                                 original_max_position_embeddings=8)))
    values = tracer.from_arrays(r(4, 6), list(r(2, 6, 2)), list(r(1, 6, 2)), list(r(1, 6, 3)), mask="causal",
                                v_norm=True)
    indexed = tracer.from_arrays(r(5, 6), list(r(2, 6, 2)), list(r(2, 6, 2)), list(r(2, 6, 2)), o=r(4, 6),
                                 sparse=dict(topk=2, scale=0.5), index_q=r(6, 4), index_k=r(6, 2), index_w=r(6, 2))
    dense = tracer.from_arrays(r(6, 6), list(r(2, 6, 4)), list(r(1, 6, 4)), list(r(1, 6, 2)), mask="chunked:4",
                               q_norm="l2", k_norm="l2", qk_norm_after_rope=True,
                               rope=dict(base=10.0, temperature=dict(scale=0.5, floor=2)),
                               shared_kv=dict(source="layer 1", x=r(6, 6)))
    kda = tracer.from_arrays(r(4, 6), list(r(2, 6, 2)), list(r(1, 6, 2)), list(r(1, 6, 3)), o=r(6, 6),
                             linear=dict(rule="kda", decay=(0.5 + rng.random((2, 4, 2)) / 2).tolist(),
                                         beta=(2 * rng.random((2, 4))).tolist()), residual=dict(norm="none"))
    v4 = tracer.from_arrays(r(5, 6), **v4_layer.arrays(n=5, seed=6))
    return [("QK-norm over all heads, yarn, output norm", sc, {}),
            ("DeepSeek V4's compressed sparse layer, sinks", v4, {}),
            ("DeepSeek V4's compressed sparse layer, columns", v4, dict(layout="columns")),
            ("a lightning indexer of 2 heads, top-2", indexed, {}),
            ("a lightning indexer, by-hand, columns", indexed, dict(arithmetic="by-hand", layout="columns")),
            ("linear kda, grouped, columns", kda, dict(layout="columns")),
            ("linear kda decoded, grouped, l2", tracer.from_arrays(
                r(4, 6), list(r(2, 6, 2)), list(r(1, 6, 2)), list(r(1, 6, 3)), o=r(6, 6), decode=2,
                linear=dict(rule="kda", decay=(0.5 + rng.random((2, 4, 2)) / 2).tolist(), l2=True,
                            beta=(2 * rng.random((2, 4))).tolist()), residual=dict(norm="none")), {}),
            ("linear with a checkpoint's convolution, L2 norm and gated norm", tracer.from_arrays(
                r(5, 4), list(r(2, 4, 3)), list(r(1, 4, 3)), list(r(1, 4, 2)), linear=dict(
                    rule="delta", decay=0.5 + rng.random((2, 5)) / 2, beta=2 * rng.random((2, 5)), l2=True,
                    conv=dict(q=r(2, 3, 3), k=r(1, 3, 3), v=r(1, 2, 3)),
                    norm=dict(w_z=r(2, 4, 2), gain=r(2), eps=1e-6, act="silu"))), {}),
            ("MiniMax's lightning layer: SiLU'd q, k, v, one norm over all heads, columns", tracer.from_arrays(
                r(5, 4), list(r(2, 4, 3)), list(r(2, 4, 3)), list(r(2, 4, 2)), o=r(4, 4), defaults=dict(scale="none"),
                linear=dict(rule="decay", decay=[[0.9] * 5, [0.6] * 5], act="silu",
                            norm=dict(w_z=r(2, 4, 2), gain=r(2, 2), eps=1e-6, act="sigmoid", scope="all"))),
             dict(layout="columns")),
            ("output gate with a bias, two heads, residual", tracer.from_arrays(
                r(3, 4), list(r(2, 4, 2)), list(r(2, 4, 2)), list(r(2, 4, 2)), o=r(4, 4), gate=list(r(2, 4, 2)),
                b_gate=list(r(2, 2)), mask="causal", residual=dict(norm="none")), {}),
            ("linear decay, by-hand", tracer.from_arrays(r(3, 4), r(4, 2), r(4, 2), r(4, 2), linear=dict(rule="decay", decay=0.5)),
             dict(arithmetic="by-hand")),
            ("values normed, grouped", values, {}),
            ("weightless QK-norm after the rotation, chunked", dense, {}),
            ("QK-norm over all heads, by-hand, columns", sc, dict(arithmetic="by-hand", layout="columns")),
            ("latent attention, compressed queries, yarn", latent, {}),
            ("latent attention, by-hand, columns", latent, dict(arithmetic="by-hand", layout="columns")),
            ("latent attention decoded, norm_in", tracer.from_arrays(
                r(4, 6), mla=dict(down=r(6, 3), rope_k=r(6, 2), up_k=list(r(2, 3, 2)), up_v=list(r(2, 3, 2)), q=list(r(2, 6, 2)),
                                  rope_q=list(r(2, 6, 2)), kv_norm=r(3)), o=r(4, 6), residual=dict(norm="layer"), decode=2,
                norm_in=dict(kind="rms", gain=r(6), bias=np.zeros(6), eps=1e-5)), {})]


CASES = ([(f"{name}, {preset}", name, {"arithmetic": preset}) for name in small_builtins()
          for preset in ("exact", "by-hand")] + generated() + with_norm_in() + with_mechanisms())


@pytest.mark.parametrize("label,scenario,keys", CASES, ids=[c[0] for c in CASES])
def test_every_cell_ends_on_its_value_and_sources_reproduce_it(label, scenario, keys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tracer.AttentionWarning)
        trace = tracer.run(scenario, **keys)
    kinds = set()
    # float32 cells are only shown as fractions close to float32 precision
    fraction_tol = 1e-9 if trace.dtype == np.float64 else 1e-6
    for step in trace.steps:
        kinds.add(step.kind)
        a = trace[step.id]
        for r in range(a.shape[0]):
            for c in range(a.shape[1]):
                text = trace.explain(step.id, r, c)
                assert text.startswith(step.id + "["), text
                value, rtol = shown_value(text, fraction_tol)
                if isinstance(value, float) and math.isinf(value):
                    assert a[r, c] == value, text
                else:
                    assert float(value) == pytest.approx(float(a[r, c]), rel=rtol, abs=rtol if isinstance(value, Fraction) else 1e-300), text
                check_sources(trace, step, r, c)
    if trace.scenario.linear is not None:   # a linear layer: a state where the others have scores and weights
        assert {"x", "q", "k", "v", "decay", "state", "o", "implicit", "z"} <= kinds
        return
    standard = {"scaled", "weights"} if not trace.arithmetic.online else {"max", "sums", "acc"}
    projections = {"q_nope", "k_nope"} if trace.scenario.mla is not None else \
        {"q_rot", "k"} if trace.scenario.compressed is not None else {"q", "k"}   # V4's queries enter turned
    assert {"x", "v", "scores", "z"} | projections | standard <= kinds


def check_sources(trace, step, r: int, c: int) -> None:
    src = trace.sources(step.id, r, c)
    assert set(src) <= set(step.inputs), (step.id, src.keys())
    for sid, cells in src.items():
        shape = trace.step(sid).shape
        assert cells and all(0 <= i < shape[0] and 0 <= j < shape[1] for i, j in cells), (step.id, sid)
    value = float(trace[step.id][r, c])
    pick = lambda sid: np.array([trace[sid][i, j] for i, j in src[sid]], dtype=np.float64)  # noqa: E731
    if step.key or (step.kind == "z" and trace.arithmetic.online):
        return   # the online softmax's block steps: their arithmetic is checked in test_online.py
    if step.kind in ("scores", "z", "absorbed"):   # (rotated) queries · (the group's rotated) keys; weights · values
        got = pick(step.inputs[0]) @ pick(step.inputs[1])
        if len(step.inputs) == 4:   # latent attention: content, then position
            got += pick(step.inputs[2]) @ pick(step.inputs[3])
    elif step.kind == "sums":
        got = pick(step.inputs[0]).sum()
        if trace.scenario.sinks is not None:   # plus the sink's power, which is its share of the sum
            got += value * float(trace[step.id.replace("sums", "sink")][r, c])   # the same cell: one wide either way
    elif step.kind == "concat":  # one cell of the head it came from
        (sid,) = src
        head = c // trace.scenario.d_v if trace.layout == 'rows' else r // trace.scenario.d_v
        assert sid == parse(step.id).with_kind("gated" if trace.scenario.w_gate is not None else "z", head)
        got = pick(sid)[0]
    elif (step.kind == "masked" and value > -math.inf) or (step.kind == "scaled" and trace.arithmetic.scale == "none"):
        got = pick(step.inputs[0])[0]
    elif step.kind == "residual":
        got = pick("x")[0] + pick(step.inputs[1])[0]
    else:
        return
    tol = 1e-12 if trace.dtype == np.float64 else 1e-5
    assert got == pytest.approx(value, rel=tol, abs=tol), (step.id, r, c)


def test_cases_reach_every_step_kind():
    from tracer.steps import KINDS
    kinds = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tracer.AttentionWarning)
        for _, scenario, keys in CASES:
            kinds |= {s.key or s.kind for s in tracer.run(scenario, **keys).steps}
    assert kinds == set(KINDS)


def test_explain_describes_the_mask_the_trace_ran_with():
    """A mask given to run() (not the scenario's) that hides an earlier key: the story must not
    say the key comes after the query."""
    sc = tracer.load_scenario("gpt_causal")
    n = sc.n
    allowed = np.tril(np.ones((n, n), int))
    allowed[2, 0] = 0                                   # query 3 may not see key 1, which comes before it
    trace = tracer.run(sc, mask=allowed.tolist())
    text = trace.explain("h0.masked", 2, 0)
    assert "−∞" in text and "comes after" not in text and "mask" in text
    causal = tracer.run(sc).explain("h0.masked", 0, 2)  # the scenario's causal mask: a later key
    assert "comes after" in causal
