"""The one registry of mechanisms (tracer/mechanisms) and what the rest of the house reads from it:
for a layer with each mechanism, written here, the scenario keys are accepted where the declaration
says and nowhere else, from_arrays takes its keywords, describe() tells it, the paths that do not
run it refuse it in one line naming it (online, [decode]) or fall back to the stage kernels (fused),
and the plan depends on it."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import tracer
import v4_layer
from tracer.compute import engine_for
from tracer.mechanisms import MECHANISMS
from tracer.scenario.build import TOP_KEYS, WEIGHT_KEYS

EYE = np.eye(2)
X = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
MLA = dict(down=[[1, 0], [0, 1]], rope_k=[[1, 0], [0, 1]], up_k=[[[1, 0], [0, 1]]], up_v=[[[1, 0], [0, 1]]],
           q=[[[1, 0], [0, 1]]], rope_q=[[[1, 0], [0, 1]]])
# each mechanism as from_arrays takes it, on a one-head layer of three tokens
LAYERS = {"qk_norm": dict(q_norm=[1.0, 2.0], k_norm=[1.0, 1.0]), "softcap": dict(softcap=2.0),
          "alibi": dict(alibi=True), "sinks": dict(sinks=[0.5]), "score_bias": dict(score_bias=np.zeros((3, 3))),
          "out_norm": dict(o=EYE, out_norm={}), "rotary": dict(rope={}), "latent": dict(mla=MLA, q=None, k=None, v=None),
          "v_norm": dict(v_norm=True),
          "indexer": dict(sparse=dict(topk=1), index_q=[[1.0], [1.0]], index_k=[[1.0], [0.0]]),
          "q_temp": dict(rope=dict(dims=0, temperature=dict(scale=1.0, floor=1))),
          "kv_sharing": dict(shared_kv=dict(source="layer A", x=X)),
          "output_gate": dict(gate=EYE), "linear": dict(linear=dict(rule="delta", beta=0.5)),
          "compressed": v4_layer.arrays(n=3, sinks=False, d_model=2)}
# what a run of each does on each path, as the modules' docstrings and the README say
ONLINE = {"qk_norm": True, "softcap": False, "alibi": False, "sinks": False, "score_bias": False, "out_norm": True,
          "rotary": True, "latent": False, "v_norm": True, "indexer": False, "q_temp": True, "kv_sharing": True,
          "output_gate": False, "linear": False, "compressed": False}
DECODE = {"qk_norm": False, "softcap": False, "alibi": False, "sinks": False, "score_bias": False,
          "out_norm": False, "rotary": True, "latent": True, "v_norm": False, "indexer": False, "q_temp": False,
          "kv_sharing": False, "output_gate": False, "linear": True, "compressed": False}
LABELS = {"qk_norm": "weights.q_norm", "softcap": "softcap", "alibi": "alibi", "sinks": "weights.sinks",
          "score_bias": "score_bias", "out_norm": "out_norm", "rotary": "rope", "latent": r"\[mla\]",
          "v_norm": "weights.v_norm", "indexer": r"\[sparse\]", "q_temp": r"rope\.temperature", "kv_sharing": "shared_kv",
          "output_gate": "weights.gate", "linear": r"\[linear\]", "compressed": r"\[compressed\]"}


def layer(name: str, **keys) -> tracer.Scenario:
    return tracer.from_arrays(**{"x": X, "q": EYE, "k": EYE, "v": EYE, "mask": "causal", **LAYERS[name], **keys})


def test_every_mechanism_is_tested_here():
    assert set(MECHANISMS) == set(LAYERS)


@pytest.mark.parametrize("name", list(LAYERS))
def test_its_keys_and_keywords_are_the_readers(name):
    m = MECHANISMS[name]
    assert set(m.keys) <= set(TOP_KEYS) and set(m.weight_keys) <= set(WEIGHT_KEYS)
    assert set(m.arguments) <= set(inspect.signature(tracer.from_arrays).parameters)
    sc = layer(name)
    with_it = {"latent": {"rotary"}}.get(name, set())   # latent attention's k_pe and q_pe rotate
    assert m.on(sc) and {p.name for p in MECHANISMS.values() if p.on(sc)} == {name} | with_it
    assert (m.describe_key or m.name) in sc.describe()
    assert sc.dims().of(name) is not None and tracer.load_scenario("by_hand").dims().of(name) is None


@pytest.mark.parametrize("name", list(LAYERS))
def test_the_online_algorithm_runs_it_or_refuses_it_naming_it(name):
    if ONLINE[name]:
        online, standard = tracer.run(layer(name), algorithm="online", block=2), tracer.run(layer(name))
        np.testing.assert_allclose(online["h0.z"], standard["h0.z"], rtol=1e-12, atol=1e-15)
    else:
        with pytest.raises(tracer.ScenarioError, match=rf"^algorithm: expected standard with {LABELS[name]} \("):
            tracer.run(layer(name), algorithm="online")
    assert MECHANISMS[name].online == ONLINE[name]


@pytest.mark.parametrize("name", list(LAYERS))
def test_decoding_runs_it_or_refuses_it_naming_it(name):
    if DECODE[name]:
        decoded, whole = tracer.run(layer(name, decode=1)), tracer.run(layer(name))
        np.testing.assert_allclose(decoded["t2.h0.z"][0], whole["h0.z"][2], rtol=1e-12, atol=1e-15)
    else:
        # DeepSeek V4's mask is a matrix (window, entries complete, entries kept): refused by the mask first
        first = r"mask: expected causal with \[decode\]" if name == "compressed" else \
            rf"{LABELS[name]}: expected no \[decode\] section with it"
        with pytest.raises(tracer.ScenarioError, match="^" + first):
            layer(name, decode=1)
    assert MECHANISMS[name].decode == DECODE[name]


@pytest.mark.parametrize("name", list(LAYERS))
def test_the_fused_kernels_run_it_or_leave_it_to_the_stage_kernels(name):
    assert engine_for(layer(name), "fused") == ("fused" if MECHANISMS[name].fused else "stages")
