"""A linear layer's heads computed together (mechanisms/linear/compute.py): a trace that keeps every
head computes them all in one call, on either engine (the compiled kernel, the NumPy twin), and each
head's steps equal the recurrence written here head by head in plain NumPy: a checkpoint's
convolution, the L2 norm, grouped keys and values, the decay and β, and the gated norm."""
from __future__ import annotations

import numpy as np
import pytest

import tracer
from tracer.mechanisms.linear import compute

N, D, HEADS, GROUPS, D_K, D_V, WIDTH = 7, 5, 4, 2, 3, 2, 3


def silu(u):
    return u / (1 + np.exp(-u))


def conv(a, w):
    """out[t, c] = SiLU(Σ_j w[c, j]·a[t − K + 1 + j, c]), reading 0 before the first token."""
    K = w.shape[1]
    return silu(np.array([[sum(w[c, j] * a[t - K + 1 + j, c] for j in range(K) if t - K + 1 + j >= 0)
                           for c in range(a.shape[1])] for t in range(len(a))]))


def unit(a):
    return a / np.sqrt((a * a).sum(axis=1, keepdims=True) + 1e-6)


def recurrence(q, k, v, alpha, beta, rule):
    """(states, o): S ← diag(α)·S, then the delta rule's β·k·(v − Sᵀk)ᵀ or the decay rule's k·vᵀ;
    o = Sᵀq."""
    S, states, o = np.zeros((k.shape[1], v.shape[1])), [], []
    for t in range(len(k)):
        S = np.resize(alpha[t], k.shape[1])[:, None] * S
        S = S + np.outer(k[t], v[t] if rule == "decay" else beta[t] * (v[t] - S.T @ k[t]))
        states.append(S)
        o.append(S.T @ q[t])
    return np.array(states), np.array(o)


@pytest.fixture(scope="module")
def layer():
    rng = np.random.default_rng(33)
    return dict(x=rng.normal(size=(N, D)), q=rng.normal(size=(HEADS, D, D_K)), k=rng.normal(size=(GROUPS, D, D_K)),
                v=rng.normal(size=(GROUPS, D, D_V)), conv=dict(q=rng.normal(size=(HEADS, D_K, WIDTH)),
                                                               k=rng.normal(size=(GROUPS, D_K, WIDTH)),
                                                               v=rng.normal(size=(GROUPS, D_V, WIDTH))),
                w_z=rng.normal(size=(HEADS, D, D_V)), gain=rng.uniform(0.5, 1.5, D_V),
                alpha=rng.uniform(0.3, 1, size=(HEADS, N, D_K)), beta=rng.uniform(0, 2, size=(HEADS, N)))


def scenario(a: dict, rule: str, **more):
    section = dict(rule=rule, decay=a["alpha"] if rule == "kda" else a["alpha"][..., 0], l2=True, conv=a["conv"],
                   norm=dict(w_z=a["w_z"], gain=a["gain"], eps=1e-6, act="silu"))
    if rule != "decay":
        section["beta"] = a["beta"]
    return tracer.from_arrays(a["x"], list(a["q"]), list(a["k"]), list(a["v"]), linear=section, **more)


@pytest.mark.parametrize("rule", ["delta", "decay", "kda"])
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
def test_every_head_at_once_is_the_recurrence_head_by_head(monkeypatch, layer, rule, compiled):
    monkeypatch.setattr(compute, "compiles", lambda *sizes: compiled)
    trace = tracer.run(scenario(layer, rule), lazy=False)
    a, x = layer, layer["x"]
    for h in range(HEADS):
        g = h // (HEADS // GROUPS)
        q = unit(conv(x @ a["q"][h], a["conv"]["q"][h]))
        k = unit(conv(x @ a["k"][g], a["conv"]["k"][g]))
        v = conv(x @ a["v"][g], a["conv"]["v"][g])
        alpha = a["alpha"][h] if rule == "kda" else a["alpha"][h, :, :1]
        states, o = recurrence(q / np.sqrt(D_K), k, v, alpha, a["beta"][h], rule)
        ones = np.identity(N)   # the implicit weights: column s is o when value s is 1 and the others 0
        A = np.stack([recurrence(q / np.sqrt(D_K), k, ones[:, s:s + 1], alpha, a["beta"][h], rule)[1][:, 0]
                      for s in range(N)], axis=1)
        z = o / np.sqrt((o * o).mean(axis=1, keepdims=True) + 1e-6) * a["gain"] * silu(x @ a["w_z"][h])
        for sid, want in ((f"h{h}.q_unit", q), (f"h{h}.state", states.reshape(N * D_K, D_V)), (f"h{h}.o", o),
                          (f"h{h}.implicit", A), (f"h{h}.z", z)):
            np.testing.assert_allclose(trace.rows(sid), want, rtol=1e-9, atol=1e-12, err_msg=sid)
        for sid, want in ((f"kv{g}.k_unit", k), (f"kv{g}.v_conv", v)):
            np.testing.assert_allclose(trace.rows(sid), want, rtol=1e-9, atol=1e-12, err_msg=sid)


@pytest.mark.parametrize("lazy,small,calls", [(False, True, [(HEADS, False)]), (True, True, [(HEADS, False)]),
                                               (True, False, [(1, False)] * HEADS)])
def test_a_trace_that_keeps_every_head_computes_them_in_one_call(monkeypatch, layer, lazy, small, calls):
    """The outputs of every head in one call (one a head in a lazy trace whose heads' steps would not
    be small together); each head's states, n·d_k × d_v numbers, in a call of their own when first
    read, and once."""
    if not small:
        monkeypatch.setattr(compute.memory, "EAGER_BYTES", 1)
    seen = []

    def counted(q, *args, **keywords):
        seen.append((len(q), keywords["states"]))
        return all_heads(q, *args, **keywords)
    all_heads = compute.all_heads
    monkeypatch.setattr(compute, "all_heads", counted)
    monkeypatch.setattr(compute, "compiles", lambda *sizes: True)
    trace = tracer.run(scenario(layer, "delta"), lazy=lazy)
    trace.rows("h0.o")
    assert seen == calls[:1] and trace.held("h0.state") is None
    for h in range(HEADS):
        trace.rows(f"h{h}.state")
        trace.rows(f"h{h}.state")
        assert trace.held(f"h{h}.state") is not None
    assert [c for c in seen if not c[1]] == calls and seen.count((1, True)) == HEADS


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
def test_the_projections_biases_reach_every_head(monkeypatch, layer, compiled):
    """q, k and v with biases (one product for every projection on the compiled path): each head's
    raw projections are x·W + b, its group's for the keys and values."""
    monkeypatch.setattr(compute, "compiles", lambda *sizes: compiled)
    rng = np.random.default_rng(7)
    b = dict(bq=rng.normal(size=(HEADS, D_K)), bk=rng.normal(size=(GROUPS, D_K)), bv=rng.normal(size=(GROUPS, D_V)))
    trace = tracer.run(scenario(layer, "delta", **b), lazy=False)
    x = layer["x"]
    for h in range(HEADS):
        g = h // (HEADS // GROUPS)
        for sid, want in ((f"h{h}.q", x @ layer["q"][h] + b["bq"][h]), (f"kv{g}.k", x @ layer["k"][g] + b["bk"][g]),
                          (f"kv{g}.v", x @ layer["v"][g] + b["bv"][g])):
            np.testing.assert_allclose(trace.rows(sid), want, rtol=1e-12, atol=1e-12, err_msg=sid)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
def test_lightning_s_norm_over_every_head_in_a_lazy_trace(monkeypatch, layer, compiled):
    """MiniMax's lightning layer (SiLU on q, k, v; the decay rule; q not scaled; one RMS norm over
    every head's o at a token, each head its share of the gain): a lazy trace whose heads would be
    computed one at a time computes them together, since each head's z needs all of them."""
    monkeypatch.setattr(compute, "compiles", lambda *sizes: compiled)
    monkeypatch.setattr(compute.memory, "EAGER_BYTES", 1)
    a, x = layer, layer["x"]
    gain = np.random.default_rng(5).uniform(0.5, 1.5, (HEADS, D_V))
    norm = dict(w_z=a["w_z"], gain=gain, eps=1e-6, act="sigmoid", scope="all")
    trace = tracer.run(tracer.from_arrays(x, list(a["q"]), list(a["k"]), list(a["v"]), defaults=dict(scale="none"),
                                          linear=dict(rule="decay", decay=a["alpha"][..., 0], act="silu", norm=norm)),
                       lazy=True)
    o = []
    for h in range(HEADS):
        g = h // (HEADS // GROUPS)
        q, k, v = silu(x @ a["q"][h]), silu(x @ a["k"][g]), silu(x @ a["v"][g])
        o.append(recurrence(q, k, v, a["alpha"][h, :, :1], None, "decay")[1])
    rms = np.sqrt(np.mean([(oh * oh).mean(axis=1) for oh in o], axis=0) + 1e-6)[:, None]
    for h in reversed(range(HEADS)):   # the last head first: it must not be computed alone
        z = o[h] / rms * gain[h] / (1 + np.exp(-(x @ a["w_z"][h])))
        np.testing.assert_allclose(trace.rows(f"h{h}.o"), o[h], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(trace.rows(f"h{h}.z"), z, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
def test_an_output_beyond_float32_is_named_on_either_engine(monkeypatch, layer, compiled):
    """Keys and values of 1e13 fit float32; the outputs S_tᵀ·q_t they make (≈ 1e39) do not: the
    trace names head 1's o (the first head that leaves the range), where float64 runs."""
    monkeypatch.setattr(compute, "compiles", lambda *sizes: compiled)
    q = np.array(layer["q"])
    q[0] *= 1e-30   # head 0 stays in range
    sc = tracer.from_arrays(np.full((N, D), 1e13), list(q), list(layer["k"]), list(layer["v"]),
                            defaults=dict(scale="none"), linear=dict(rule="decay", decay=np.ones((HEADS, N))))
    tracer.run(sc, dtype="float64", lazy=False)
    with pytest.raises(tracer.ScenarioError) as info:
        tracer.run(sc, dtype="float32", lazy=False)
    assert info.value.field == "h1.o", str(info.value)
