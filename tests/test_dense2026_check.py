"""`attnsim check` on the dense families' lessons (CONTRACT §19, §17): a student's answers made
with the classic mistake of each (÷√d_k where the model divides by nothing, a causal mask instead
of the chunks, the queries not warmed) are named by it; the right answers pass."""
from __future__ import annotations

import numpy as np
import pytest

import tracer

NOPE = dict(x=np.array([[1.0, 0], [0, 1], [1, 1], [1, 0], [0, 1]]), q=np.eye(2), k=np.eye(2), v=np.eye(2),
            mask="causal", rope=dict(dims=0, temperature=dict(scale=0.5, floor=2)))


def answers(trace, *ids) -> dict:
    return {sid: trace[sid] for sid in ids}


@pytest.mark.parametrize("scenario, wrong, ids, step, cause", [
    ("no_scale", dict(scale="sqrt"), ("h0.scaled", "h0.weights"), "h0.scaled", "scale_where_none"),
    ("chunked", dict(mask="causal"), ("h0.masked", "h0.weights"), "h0.masked", "chunks_as_causal"),
])
def test_the_mistake_is_named(scenario, wrong, ids, step, cause):
    right = tracer.check(scenario, answers(tracer.run(scenario), *ids))
    assert right.ok and right.cause is None
    got = tracer.check(scenario, answers(tracer.run(scenario, **wrong), *ids))
    assert (got.first["step"], got.cause) == (step, cause), got.report()


def test_queries_not_warmed_are_named():
    sc = tracer.from_arrays(**NOPE)
    cold = tracer.run(tracer.from_arrays(**{**NOPE, "rope": dict(dims=0, temperature=dict(scale=0.0, floor=2))}))
    got = tracer.check(sc, {"h0.q_temp": cold["h0.q_temp"], "h0.weights": cold["h0.weights"]})
    assert (got.first["step"], got.cause) == ("h0.q_temp", "no_temperature"), got.report()
    assert tracer.check(sc, answers(tracer.run(sc), "h0.q_temp", "h0.weights")).ok


def test_latent_queries_not_warmed_are_named():
    """Mistral 4's latent attention warms both parts of its queries: a student's cold ones are named."""
    rng = np.random.default_rng(1)
    mla = dict(down=rng.normal(size=(4, 3)), rope_k=rng.normal(size=(4, 2)), up_k=rng.normal(size=(2, 3, 2)),
               up_v=rng.normal(size=(2, 3, 2)), q=rng.normal(size=(2, 4, 2)), rope_q=rng.normal(size=(2, 4, 2)))
    x = rng.normal(size=(6, 4))

    def latent(scale: float):
        rope = dict(base=10.0, style="interleaved", temperature=dict(scale=scale, floor=2, shift=0))
        return tracer.from_arrays(x, mla=mla, mask="causal", rope=rope)
    cold = tracer.run(latent(0.0))
    got = tracer.check(latent(0.5), {"h0.q_temp": cold["h0.q_temp"], "h0.weights": cold["h0.weights"]})
    assert (got.first["step"], got.cause) == ("h0.q_temp", "no_temperature"), got.report()
    assert tracer.check(latent(0.5), answers(tracer.run(latent(0.5)), "h0.q_temp", "h0.weights")).ok
