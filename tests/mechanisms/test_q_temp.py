"""The query temperature (Llama 4's layers without positions, Mistral 4's every layer; CONTRACT §17;
mechanisms/q_temp): `[rope] temperature = { scale = β, floor = F, shift = o }`, the steps `tau` (each
token's τ(p) = 1 + β·ln(1 + ⌊(p + o)/F⌋)) and `h{h}.q_temp` = q·τ(p); `[rope] dims = 0` for positions
that do not turn. τ cell by cell against the formula written here, the layer against NumPy, the
explanations, the keys and refusals."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import tracer
from mechanisms_reference import rotate
from tui.cli import main

RNG = np.random.default_rng(7)
X = RNG.normal(size=(8, 4))
W_Q, W_K, W_V = RNG.normal(size=(4, 4)), RNG.normal(size=(4, 4)), RNG.normal(size=(4, 2))


def tau(p: int, scale: float, floor: float, shift: int = 1) -> float:
    return 1 + scale * math.log(1 + math.floor((p + shift) / floor))


def layer(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> dict:
    """Causal softmax attention ÷ √d_k, rows orientation."""
    s = q @ k.T / math.sqrt(q.shape[1])
    s = np.where(np.tril(np.ones_like(s)) > 0, s, -np.inf)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    w = e / e.sum(axis=1, keepdims=True)
    return {"h0.weights": w, "h0.z": w @ v}


def nope(offset: int = 0, **temperature) -> tracer.Scenario:
    return tracer.from_arrays(X, W_Q, W_K, W_V, mask="causal", rope=dict(dims=0, offset=offset, temperature=temperature))


@pytest.mark.parametrize("engine, algorithm", [("stages", "standard"), ("fused", "standard"), ("stages", "online")])
@pytest.mark.parametrize("offset, temperature", [(0, dict(scale=0.5, floor=2)), (8188, dict(scale=0.1, floor=8192)),
                                                 (3, dict(scale=0.25, floor=3, shift=0))])
def test_nope_layer_against_numpy(offset, temperature, engine, algorithm):
    trace = tracer.run(nope(offset, **temperature), engine=engine, algorithm=algorithm, block=3)
    taus = np.array([tau(offset + i, **temperature) for i in range(8)])
    np.testing.assert_allclose(trace.rows("tau")[:, 0], taus, rtol=1e-15)
    np.testing.assert_allclose(trace.rows("h0.q_temp"), (X @ W_Q) * taus[:, None], rtol=1e-14)
    want = layer((X @ W_Q) * taus[:, None], X @ W_K, X @ W_V)
    for sid in ("h0.z",) if algorithm == "online" else ("h0.weights", "h0.z"):
        np.testing.assert_allclose(trace.rows(sid), want[sid], rtol=1e-12, atol=1e-14, err_msg=sid)
    assert not any(s.id.endswith("_rot") or s.id == "freqs" for s in trace.steps)


def test_the_lessons_numbers_and_llama_4s():
    taus = tracer.run(nope(scale=0.5, floor=2)).rows("tau")[:, 0]
    np.testing.assert_allclose(taus, [1, 1.347, 1.347, 1.549, 1.549, 1.693, 1.693, 1.805], atol=5e-4)
    llama = tracer.run(nope(8188, scale=0.1, floor=8192)).rows("tau")[:, 0]   # positions 8188 … 8195
    assert (llama[:3] == 1).all() and llama[3] == pytest.approx(1 + 0.1 * math.log(2)) == pytest.approx(1.0693, abs=1e-4)


def test_with_rotation_the_queries_are_warmed_after_it():
    rope = dict(base=10.0, style="half", offset=2, temperature=dict(scale=1.0, floor=3, shift=0))
    trace = tracer.run(tracer.from_arrays(X, W_Q, W_K, W_V, mask="causal", rope=rope))
    ids = [s.id for s in trace.steps]
    assert ids.index("h0.q_rot") < ids.index("h0.q_temp") < ids.index("h0.scores")
    assert trace.step("h0.q_temp").inputs == ("h0.q_rot", "tau")
    taus = np.array([tau(2 + i, 1.0, 3, 0) for i in range(8)])
    q = rotate(X @ W_Q, dict(rope, temperature=None)) * taus[:, None]
    want = layer(q, rotate(X @ W_K, dict(rope, temperature=None)), X @ W_V)
    np.testing.assert_allclose(trace.rows("h0.z"), want["h0.z"], rtol=1e-12)


def test_the_explanations_give_the_numbers():
    trace = tracer.run(nope(scale=0.5, floor=2))
    assert trace.explain("tau", 7, 0).endswith("= 1 + 0.5·ln(1 + ⌊(7 + 1)/2⌋) = 1 + 0.5·ln 5 = 1.805   (τ(7) > 1: the "
                                               "queries of position 7 are warmed)")
    assert trace.explain("tau", 0, 0).endswith("= 1 + 0.5·ln 1 = 1   (τ(0) = 1: no position below 1 is warmed)")
    q = trace.rows("h0.q")[7, 1]
    text = trace.explain("h0.q_temp", 7, 1).replace("−", "-")
    assert f"= {q:.3f}" in text and f"× τ(7) = {q:.3f}" in text and f"× 1.805 = {q * 1.80471896:.4g}" in text
    assert trace.step("tau").formula == "τ(p) = 1 + 0.5·ln(1 + ⌊(p + 1)/2⌋), p the token's position"


def test_export_holds_tau_and_the_temperature(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text("x = [[1, 0], [0, 1], [1, 1]]\nmask = \"causal\"\n[rope]\ndims = 0\noffset = 1\n"
                    "temperature = { scale = 0.5, floor = 2 }\n[weights]\nq = [[1, 0], [0, 1]]\nk = [[1, 0], [0, 1]]\n"
                    "v = [[1, 0], [0, 1]]\n", encoding="utf-8")
    assert main(["export", str(path), "-o", str(tmp_path / "t.json")]) == 0
    doc = json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))
    steps = {s["id"]: s for s in doc["steps"]}
    assert steps["tau"]["axes"] == ["token", "one"] and steps["h0.q_temp"]["axes"] == ["token", "d_k"]
    np.testing.assert_allclose(np.array(steps["tau"]["data"])[:, 0], [tau(p, 0.5, 2) for p in (1, 2, 3)], rtol=1e-15)
    assert doc["scenario"]["temperature"] == {"scale": 0.5, "floor": 2.0, "shift": 1}


@pytest.mark.parametrize("rope, message", [
    ("temperature = { scale = -1, floor = 2 }", "rope.temperature.scale: expected a finite number ≥ 0"),
    ("temperature = { scale = 1, floor = 0 }", "rope.temperature.floor: expected a number > 0"),
    ("temperature = { scale = 1, floor = 2, shift = 0.5 }", "rope.temperature.shift: expected a whole number ≥ 0"),
    ("temperature = { scale = 1 }", "rope.temperature.floor: missing"),
    ("temperature = { scale = 1, floor = 2, base = 3 }", "rope.temperature.base"),
    ("temperature = 2", "rope.temperature: expected a table with scale and floor"),
    ("dims = 0", "rope.dims: expected an even whole number from 2 to d_k"),
])
def test_bad_keys_are_one_line_and_exit_2(tmp_path, capsys, rope, message):
    path = tmp_path / "bad.toml"
    path.write_text(f"x = [[1, 0], [0, 1]]\n[rope]\n{rope}\n[weights]\nq = [[1, 0], [0, 1]]\nk = [[1, 0], [0, 1]]\n"
                    "v = [[1, 0], [0, 1]]\n", encoding="utf-8")
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("attnsim: error: ") and message in err


def test_decode_is_refused_naming_the_temperature():
    with pytest.raises(tracer.ScenarioError, match=r"^rope\.temperature: expected no \[decode\] section"):
        tracer.from_arrays(X, W_Q, W_K, W_V, mask="causal", decode=2, rope=dict(dims=0, temperature=dict(scale=1, floor=2)))


def test_a_checkpoint_layer_says_when_the_text_is_too_short_to_be_warmed():
    from tracer.mechanisms.q_temp import said
    llama = dict(x=X, rope=dict(dims=0, temperature=dict(scale=0.1, floor=8192, shift=1)))
    assert said(llama) == "its queries are multiplied by τ(p) = 1 + 0.1·ln(1 + ⌊(p + 1)/8192⌋) (q_temp): 1 on this text"
    assert said(dict(x=X, rope=dict(dims=0, temperature=dict(scale=0.5, floor=2)))).endswith("(q_temp)")
    assert said(dict(x=X, rope=None)) is None


# ------------------------------------------------------------------ under latent attention (Mistral 4)

LATENT = dict(down=RNG.normal(size=(4, 3)), rope_k=RNG.normal(size=(4, 2)), up_k=RNG.normal(size=(2, 3, 2)),
              up_v=RNG.normal(size=(2, 3, 2)), q=RNG.normal(size=(2, 4, 2)), rope_q=RNG.normal(size=(2, 4, 2)),
              kv_norm=1.0 + RNG.random(3))
W_O = RNG.normal(size=(4, 4))
WARM = dict(scale=0.5, floor=3, shift=0)   # Mistral 4's curve: τ(p) = 1 + β·ln(1 + ⌊p/F⌋)


def latent(temperature=WARM) -> tracer.Scenario:
    rope = dict(base=10.0, style="interleaved", temperature=temperature)
    return tracer.from_arrays(X, mla=LATENT, o=W_O, mask="causal", rope=rope)


def test_latent_queries_are_warmed_in_both_parts():
    """Mistral 4 multiplies the whole query [q_nope | q_pe] by τ(p) (transformers' Mistral4Attention):
    every step against NumPy written here, the absorbed scores the same as the rebuilt ones."""
    trace = tracer.run(latent())
    rope = dict(base=10.0, style="interleaved")
    taus = np.array([tau(p, **WARM) for p in range(8)])
    m = {k: np.asarray(v) for k, v in LATENT.items()}
    c = X @ m["down"]
    c = c / np.sqrt((c * c).mean(axis=1, keepdims=True) + 1e-6) * m["kv_norm"]
    k_pe = rotate(X @ m["rope_k"], rope)
    zs = []
    for h in range(2):
        q = np.concatenate([X @ m["q"][h], rotate(X @ m["rope_q"][h], rope)], axis=1) * taus[:, None]
        k = np.concatenate([c @ m["up_k"][h], k_pe], axis=1)
        want = layer(q, k, c @ m["up_v"][h])
        np.testing.assert_allclose(trace.rows(f"h{h}.q_temp"), q, rtol=1e-12)
        np.testing.assert_allclose(trace.rows(f"h{h}.scores"), q @ k.T, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(trace.rows(f"h{h}.absorbed"), q @ k.T, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(trace.rows(f"h{h}.q_latent"), q[:, :2] @ m["up_k"][h].T, rtol=1e-12)
        np.testing.assert_allclose(trace.rows(f"h{h}.weights"), want["h0.weights"], rtol=1e-12, atol=1e-14)
        zs.append(want["h0.z"])
    np.testing.assert_allclose(trace.rows("out"), np.concatenate(zs, axis=1) @ W_O, rtol=1e-12)
    assert trace.step("h0.q_temp").inputs == ("h0.q_nope", "h0.q_pe", "tau")
    assert trace.step("h0.scores").inputs == ("h0.q_temp", "h0.k_nope", "h0.q_temp", "k_pe")
    assert trace.step("h0.scores").formula == "S = Q_TEMP·[K_NOPE | K_PE]ᵀ"
    assert trace.step("h0.absorbed").inputs == ("h0.q_latent", "c_kv", "h0.q_temp", "k_pe")


def test_latent_warmed_explanations_name_the_parts():
    trace = tracer.run(latent())
    q_pe, value = trace.rows("h1.q_pe")[5, 1], trace.rows("h1.q_temp")[5, 3]
    text = trace.explain("h1.q_temp", 5, 3).replace("−", "-")
    assert f"= {q_pe:.4g} × τ(5) = {q_pe:.4g} × {tau(5, **WARM):.4g} = {value:.4g}" in text
    assert "(h1.q_pe[" in text and ", 1] times its position's τ, from tau)" in text
    scores = trace.explain("h0.scores", 4, 2)
    assert "q_temp(" in scores and "q_temp's first 2 numbers, then its last 2" in scores
    assert trace.explain("h0.absorbed", 4, 2).split("= ")[1].startswith("q_latent(")


def test_latent_without_a_temperature_is_unchanged():
    trace = tracer.run(latent(None))
    assert trace.step("h0.scores").inputs == ("h0.q_nope", "h0.k_nope", "h0.q_pe", "k_pe")
    assert not any(s.id in ("tau", "h0.q_temp") for s in trace.steps)


def test_latent_with_a_temperature_shows_and_exports(tmp_path, capsys):
    path = tmp_path / "warm.toml"
    path.write_text("x = [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]\nmask = \"causal\"\n[mla]\n"
                    "down = [[1, 0], [0, 1], [1, 1]]\nrope_k = [[1, 0], [1, 0], [1, 0]]\nup_k = [[[2, 0], [0, 0]]]\n"
                    "up_v = [[[1, 0], [0, 1]]]\nq = [[[0, 0], [1, 0], [0, 0]]]\nrope_q = [[[0, 0], [1, 0], [0, 0]]]\n"
                    "[rope]\nstyle = \"interleaved\"\ntemperature = { scale = 0.5, floor = 2, shift = 0 }\n",
                    encoding="utf-8")
    assert main(["show", str(path), "--step", "h0.q_temp"]) == 0
    assert "h0.q_temp  Queries, warmed (head 0):  [q_nope | q_pe] · τ(p), per token" in capsys.readouterr().out
    assert main(["export", str(path), "-o", str(tmp_path / "warm.json")]) == 0
    steps = {s["id"]: s for s in json.loads((tmp_path / "warm.json").read_text(encoding="utf-8"))["steps"]}
    assert steps["h0.q_temp"]["axes"] == ["token", "d_k"]
    # "sat" (position 2): q = [1, 0 | q_pe], τ(2) = 1 + 0.5·ln 2; its content score with "cat" 1·2 = 2, warmed
    np.testing.assert_allclose(steps["h0.q_temp"]["data"][2][:2], [1 + 0.5 * math.log(2), 0], rtol=1e-15)
    assert steps["h0.scores"]["data"][2][1] == pytest.approx((1 + 0.5 * math.log(2)) * (2 + math.cos(1)), rel=1e-12)
