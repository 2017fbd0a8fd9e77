"""Multi-head latent attention written by hand ([mla]; mechanisms/latent): every step against NumPy
written here from DeepSeek-V2's formulas (fixed cases and generated ones, both presets and layouts),
the absorbed scores equal to the rebuilt ones, the cache in numbers, the built-in's lesson, the
refusals. (DeepSeek's checkpoints: test_deepseek.py.)"""
from __future__ import annotations

import math
import tomllib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tracer
import tracer.export
from mechanisms_reference import allowed, rms, rotate
from tracer.mechanisms.latent.compute import absorbed_scores, cache_per_token, rebuilt_scores
from tracer.scenario import scenarios_dir


def reference(x, m: dict, o, rope: dict, mask: str, by_hand: bool) -> dict:
    """Every step by id, rows orientation, from [mla]'s keys as the file writes them (rows layout)."""
    a = {k: np.asarray(v, dtype=float) for k, v in m.items() if not isinstance(v, (int, float))}
    eps = m.get("norm_eps", 1e-6)
    out = {}
    src = x
    if "q_down" in a:
        src = out["c_q"] = rms(x @ a["q_down"], a["q_norm"], eps) if "q_norm" in a else x @ a["q_down"]
    c = out["c_kv"] = rms(x @ a["down"], a["kv_norm"], eps) if "kv_norm" in a else x @ a["down"]
    k_pe = out["k_pe"] = rotate(x @ a["rope_k"], rope)
    n, heads = len(x), len(a["q"])
    d = a["q"].shape[2] + a["rope_q"].shape[2]
    ok, zs = allowed(mask, n), []
    for h in range(heads):
        q_nope, q_pe = src @ a["q"][h], rotate(src @ a["rope_q"][h], rope)
        k_nope, v = c @ a["up_k"][h], c @ a["up_v"][h]
        s = q_nope @ k_nope.T + q_pe @ k_pe.T
        q_latent = q_nope @ a["up_k"][h].T
        absorbed = q_latent @ c.T + q_pe @ k_pe.T
        # by hand: ⌊s ÷ round(√d)⌋, a quotient within rounding of a whole number taken as that number
        scaled = np.floor(s / max(1, round(math.sqrt(d))) + 1e-9) if by_hand else s / math.sqrt(d)
        scaled = np.where(ok, scaled, -np.inf)
        e = (3.0 if by_hand else math.e) ** (scaled - scaled.max(axis=1, keepdims=True))
        w = e / e.sum(axis=1, keepdims=True)
        z = w @ v
        zs.append(z)
        out.update({f"h{h}.{k}": val for k, val in dict(q_nope=q_nope, q_pe=q_pe, k_nope=k_nope, v=v, scores=s,
                                                      q_latent=q_latent, absorbed=absorbed, weights=w, z=z).items()})
    if o is not None:
        out["out"] = np.concatenate(zs, axis=1) @ np.asarray(o, dtype=float)
    return out


def _compare(trace, ref: dict, tol: float = 1e-9):
    for sid, want in ref.items():
        np.testing.assert_allclose(trace.rows(sid), want, rtol=tol, atol=tol, err_msg=sid)


def _file():
    return tomllib.loads((scenarios_dir() / "mla.toml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("preset", ["exact", "by-hand"])
def test_builtin_against_numpy(preset):
    data = _file()
    trace = tracer.run("mla", preset)
    rope = dict(base=10000.0, **data["rope"])
    _compare(trace, reference(np.array(data["x"], float), data["mla"], None, rope, data["mask"], preset == "by-hand"))
    assert not any(s.kind in ("q", "k", "q_rot", "k_rot") for s in trace.steps)


def test_builtin_lesson():
    """The numbers the description states, worked out here."""
    t = tracer.run("mla")   # by-hand
    assert (t.rows("c_kv") == [[0, 0], [1, 0], [0, 1], [1, 1]]).all()
    assert t.rows("h0.k_nope")[1, 0] == 2 and t.rows("h1.k_nope")[2, 1] == 2   # each head reads its own number
    sat, cat = 2, 1
    assert t.rows("h0.q_nope")[sat] @ t.rows("h0.k_nope")[cat] == 2
    assert t.rows("h0.q_pe")[sat] @ t.rows("k_pe")[cat] == pytest.approx(math.cos(1), rel=1e-12)
    assert t.rows("h0.scores")[sat, cat] == pytest.approx(2 + math.cos(1), rel=1e-12)
    assert f"{2 + math.cos(1):.3f}" == "2.540" and f"{math.cos(1):.3f}" == "0.540"
    assert t.rows("h0.absorbed")[sat, cat] == pytest.approx(2 + math.cos(1), rel=1e-12)
    assert list(t.rows("h0.q_latent")[sat]) == [2, 0] and list(t.rows("c_kv")[cat]) == [1, 0]
    assert t.scenario.cache_per_token()["MLA"] == 4 and t.scenario.cache_per_token()["MHA"] == 8
    v3 = 2 * 128 * 128
    assert (512 + 64, v3, v3 // (512 + 64)) == (576, 32768, 56) and round(v3 / 576) == 57
    text = t.explain("c_kv", 1, 0)
    assert "2 + 2 = 4 numbers" in text and "2·2·2 = 8" in text


def _gen(draw) -> tuple:
    heads, rank, nope, d_v = (draw(st.integers(1, 3)) for _ in range(4))
    n, d_model, rope_dims = draw(st.integers(1, 5)), draw(st.integers(1, 4)), 2 * draw(st.integers(1, 2))
    q_rank = draw(st.sampled_from([None, 1, 3]))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    r = lambda *shape: rng.integers(-2, 3, shape).astype(float)  # noqa: E731
    src = d_model if q_rank is None else q_rank
    m = dict(down=r(d_model, rank), rope_k=r(d_model, rope_dims), up_k=r(heads, rank, nope), up_v=r(heads, rank, d_v),
             q=r(heads, src, nope), rope_q=r(heads, src, rope_dims))
    if q_rank is not None:
        m["q_down"] = r(d_model, q_rank)
        if draw(st.booleans()):
            m["q_norm"] = 0.5 + rng.random(q_rank)
    if draw(st.booleans()):
        m["kv_norm"] = 0.5 + rng.random(rank)
    rope = dict(base=draw(st.sampled_from([10.0, 10000.0])), style=draw(st.sampled_from(["half", "interleaved"])))
    if draw(st.booleans()):
        rope["scaling"] = dict(type="yarn", factor=4.0, original_max_position_embeddings=4)
    return r(n, d_model), m, r(heads * d_v, d_model), rope, draw(st.sampled_from(["causal", "none"]))


@settings(max_examples=30, deadline=None)
@given(case=st.composite(_gen)(), by_hand=st.booleans(), columns=st.booleans())
def test_generated_against_numpy(case, by_hand, columns):
    x, m, o, rope, mask = case
    flip = (lambda a: np.swapaxes(np.asarray(a), -1, -2)) if columns else np.asarray
    sc = tracer.from_arrays(flip(x), mla={k: flip(v) if np.ndim(v) >= 2 else v for k, v in m.items()}, o=flip(o),
                            rope=rope, mask=mask, layout="columns" if columns else "rows")
    trace = tracer.run(sc, "by-hand" if by_hand else "exact")
    want = reference(x, m, o, rope, mask, by_hand)
    _compare(trace, want)
    for h in range(sc.heads):   # the two forms of the scores agree (here within rounding of the sums' order)
        np.testing.assert_allclose(trace.rows(f"h{h}.absorbed"), trace.rows(f"h{h}.scores"), rtol=1e-12, atol=1e-12)


def test_float32_and_the_cache_said_in_the_export(tmp_path):
    import json
    trace = tracer.run("mla", "exact", dtype="float32")
    data = _file()
    want = reference(np.array(data["x"], float), data["mla"], None, dict(base=10000.0, **data["rope"]), "causal", False)
    _compare(trace, want, tol=1e-5)
    tracer.export.write_export(tracer.run("mla"), tmp_path / "t.json")
    doc = json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))
    assert doc["scenario"]["mla"]["cache_per_token"] == {"MHA": 8, "GQA": 4, "MQA": 4, "MLA": 4}


BAD = [
    ({"up_k": None}, "mla.up_k: missing; expected W_UK"),
    ({"up_v": [[[1, 0], [0, 1]]]}, "mla.up_v: expected 2 matrices (one per head, as mla.q), got 1"),
    ({"rope_k": [[1], [1], [1]]}, "mla.rope_k: expected an even number of rotary features"),
    ({"q_norm": [1, 1]}, "mla.q_norm: expected only with mla.q_down"),
    ({"down": [[1, 0], [0, 1]]}, "mla.down: expected a 3 × rank matrix"),
    ({"extra": 1}, "mla.extra"),
]


@pytest.mark.parametrize("change,message", BAD)
def test_bad_mla_named(change, message):
    data = _file()
    data["mla"] = {k: v for k, v in {**data["mla"], **change}.items() if v is not None}
    from tracer.scenario.build import build
    with pytest.raises(tracer.ScenarioError) as info:
        build(data)
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("change,field", [
    ({"weights": {"q": [[1]]}}, "weights.q"), ({"context": [[1, 0]]}, "context"), ({"alibi": True}, "alibi"),
({"rope": {"dims": 2}}, "rope.dims")])
def test_what_latent_attention_does_not_combine_with(change, field):
    from tracer.scenario.build import build
    with pytest.raises(tracer.ScenarioError) as info:
        build({**_file(), **change})
    assert str(info.value).startswith(field), str(info.value)


def test_online_refused_with_mla():
    with pytest.raises(tracer.ScenarioError, match=r"algorithm: expected standard with \[mla\]"):
        tracer.run("mla", algorithm="online")


@pytest.mark.parametrize("preset", ["exact", "by-hand"])
@pytest.mark.parametrize("prompt", [1, 3])
def test_decoding_from_the_latent_cache(preset, prompt):
    """[decode] with [mla]: each decoded token's row equals the whole causal layer's, its scores are
    read absorbed from the cache (c_kv and k_pe, one row more a token), and the plan says how big
    the cache is in numbers."""
    from tracer.scenario.build import build
    data = dict(_file(), weights={"o": [[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]]}, residual={"norm": "none"})
    full = tracer.run(build(data), preset)
    trace = tracer.run(build(dict(data, decode={"prompt": prompt})), preset)
    for t in range(prompt, 4):
        np.testing.assert_array_equal(trace[f"t{t}.ckv_cache"], full.rows("c_kv")[: t + 1])
        np.testing.assert_array_equal(trace[f"t{t}.kpe_cache"], full.rows("k_pe")[: t + 1])
        for h in range(2):
            for kind in ("q_nope", "q_pe", "q_latent", "scores", "weights", "z"):
                got = trace[f"t{t}.h{h}.{kind}"]
                np.testing.assert_allclose(got, full.rows(f"h{h}.{kind}")[t : t + 1, : got.shape[1]], rtol=1e-12,
                                           atol=1e-12, err_msg=f"t{t}.h{h}.{kind}")
            assert trace.step(f"t{t}.h{h}.scores").inputs == (f"t{t}.h{h}.q_latent", f"t{t}.ckv_cache",
                                                               f"t{t}.h{h}.q_pe", f"t{t}.kpe_cache")
        np.testing.assert_allclose(trace[f"t{t}.out"], full.rows("out")[t : t + 1], rtol=1e-12, atol=1e-12)
        assert f"{t + 1} tokens × (2 + 2) = {4 * (t + 1)} numbers" in trace.step(f"t{t}.ckv_cache").formula
        assert f"would hold {8 * (t + 1)}" in trace.step(f"t{t}.ckv_cache").formula
    assert "absorbed" in trace.explain("t3.h0.scores", 0, 1) and "c_kv(cat)·W_UV" in trace.explain("t3.h0.v", 1, 0)


# ---------------------------------------------------------------- the absorbed form and the cache, generated

@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 6), rank=st.integers(1, 5), nope=st.integers(1, 5), seed=st.integers(0, 2**31))
def test_absorbed_equals_rebuilt(n, rank, nope, seed):
    rng = np.random.default_rng(seed)
    q, w_uk, c = rng.integers(-3, 4, (n, nope)), rng.integers(-3, 4, (rank, nope)), rng.integers(-3, 4, (n, rank))
    want = np.array([[sum(q[i, d] * sum(c[j, r] * w_uk[r, d] for r in range(rank)) for d in range(nope))
                      for j in range(n)] for i in range(n)])
    assert (absorbed_scores(q, w_uk, c) == want).all() and (rebuilt_scores(q, w_uk, c) == want).all()


@settings(max_examples=25, deadline=None)
@given(h=st.integers(1, 64), d=st.integers(1, 256), g=st.integers(1, 64), rank=st.integers(1, 1024),
       rope=st.integers(1, 128))
def test_cache_formula(h, d, g, rank, rope):
    sizes = cache_per_token(h, d, g, rank, rope)
    assert sizes == dict(MHA=2 * h * d, GQA=2 * g * d, MQA=2 * d, MLA=rank + rope)
