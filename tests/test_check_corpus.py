"""`tracer.check` on a corpus of student implementations: a Llama-style layer (4 query heads in 2
groups, rotate-half RoPE, causal, W_O with a bias) written in PyTorch float32 as a student would,
and one classic mistake seeded in each subclass. Each is reported at the step where it first shows,
with its cause; given only the layer's output, the cause is still found; the correct one passes."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tracer

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def layer():
    rng = np.random.default_rng(5)
    d = 4   # d_model = d_k = d_v: square weights, so that a transposed one still runs
    return tracer.from_arrays(rng.normal(size=(6, d)), q=[rng.normal(size=(d, d)) * 1.5 for _ in range(4)],
                              k=[rng.normal(size=(d, d)) * 1.5 for _ in range(2)],
                              v=[rng.normal(size=(d, d)) for _ in range(2)], o=rng.normal(size=(16, 16)),
                              bo=rng.normal(size=16), mask="causal", rope=dict(style="half"), name="llama_like")


class Student:
    """A correct layer, step by step, saving each intermediate under its step id."""
    skip: tuple = ()

    def __init__(self, sc):
        t = lambda a: torch.tensor(np.asarray(a), dtype=torch.float32)  # noqa: E731
        self.x, self.w_q, self.w_k, self.w_v, self.w_o, self.b_o = (t(a) for a in (sc.x, sc.w_q, sc.w_k, sc.w_v,
                                                                                   sc.w_o, sc.b_o[0]))
        self.heads, self.groups = sc.heads, sc.groups

    def project(self, x, w):
        return x @ w

    def values(self, g):
        return self.project(self.x, self.w_v[g])

    def angles(self, n, d):
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d, 2).float() / d))
        return torch.outer(torch.arange(n).float(), inv_freq)   # (n, d/2)

    def rotate(self, x):
        a = self.angles(*x.shape)
        cos, sin = torch.cat([a.cos(), a.cos()], -1), torch.cat([a.sin(), a.sin()], -1)
        half = torch.cat([-x[:, x.shape[1] // 2:], x[:, : x.shape[1] // 2]], -1)
        return x * cos + half * sin

    def group(self, h):
        return h // (self.heads // self.groups)      # repeat_interleave's order

    def scale(self, s, d_k):
        return s / math.sqrt(d_k)

    def allowed(self, n):
        return torch.tril(torch.ones(n, n, dtype=torch.bool))

    def mask(self, s):
        return s.masked_fill(~self.allowed(s.shape[0]), float("-inf"))

    def softmax(self, m):
        return torch.softmax(m, dim=-1)

    def output(self, concat):
        return concat @ self.w_o + self.b_o

    def steps(self) -> dict:
        got = {}
        for g in range(self.groups):
            got[f"kv{g}.k"] = k = self.project(self.x, self.w_k[g])
            got[f"kv{g}.v"] = self.values(g)
            got[f"kv{g}.k_rot"] = self.rotate(k)
        zs = []
        for h in range(self.heads):
            g = self.group(h)
            got[f"h{h}.q"] = q = self.project(self.x, self.w_q[h])
            got[f"h{h}.q_rot"] = q = self.rotate(q)
            got[f"h{h}.scores"] = s = q @ got[f"kv{g}.k_rot"].T
            got[f"h{h}.scaled"] = s = self.scale(s, q.shape[1])
            got[f"h{h}.masked"] = m = self.mask(s)
            got[f"h{h}.weights"] = a = self.softmax(m)
            got[f"h{h}.z"] = z = a @ got[f"kv{g}.v"]
            zs.append(z)
        got["concat"] = c = torch.cat(zs, dim=-1)
        got["out"] = self.output(c)
        return {sid: a for sid, a in got.items() if sid.split(".")[-1] not in self.skip}


class NoScale(Student):
    def scale(self, s, d_k):
        return s


class DividedByDk(Student):
    def scale(self, s, d_k):
        return s / d_k


class SoftmaxOverQueries(Student):
    def softmax(self, m):
        return torch.softmax(m, dim=0)


class DiagonalMasked(Student):
    def allowed(self, n):
        return torch.tril(torch.ones(n, n, dtype=torch.bool), diagonal=-1)


class SeesTheNextKey(Student):
    def allowed(self, n):
        return torch.tril(torch.ones(n, n, dtype=torch.bool), diagonal=1)


class MaskUpsideDown(Student):
    def allowed(self, n):
        return torch.triu(torch.ones(n, n, dtype=torch.bool))


class MaskedWithZero(Student):
    def mask(self, s):
        return s.masked_fill(~self.allowed(s.shape[0]), 0.0)


class MaskAfterSoftmax(Student):
    skip = ("masked",)

    def mask(self, s):
        return s

    def softmax(self, m):
        return torch.softmax(m, dim=-1) * self.allowed(m.shape[0])


class InterleavedPairs(Student):
    def rotate(self, x):
        a = self.angles(*x.shape)
        even, odd = x[:, 0::2], x[:, 1::2]
        out = torch.empty_like(x)
        out[:, 0::2], out[:, 1::2] = even * a.cos() - odd * a.sin(), even * a.sin() + odd * a.cos()
        return out


class TurnsTheOtherWay(Student):
    def angles(self, n, d):
        return -super().angles(n, d)


class GroupsRepeated(Student):
    def group(self, h):
        return h % self.groups                        # k.repeat(…) instead of repeat_interleave


class NoOutputProjection(Student):
    def output(self, concat):
        return concat


class NoOutputBias(Student):
    def output(self, concat):
        return concat @ self.w_o


class ValuesFromKeys(Student):
    def values(self, g):
        return self.project(self.x, self.w_k[g])


class LinearStyleWeights(Student):   # x @ W.T, as nn.Linear stores its weight
    def project(self, x, w):
        return x @ w.T


CORPUS = [(NoScale, "h0.scaled", "no_scale"), (DividedByDk, "h0.scaled", "scale_d_k"),
          (SoftmaxOverQueries, "h0.weights", "softmax_axis"), (DiagonalMasked, "h0.masked", "mask_diagonal"),
          (SeesTheNextKey, "h0.masked", "mask_ahead"), (MaskUpsideDown, "h0.masked", "mask_reversed"),
          (MaskedWithZero, "h0.masked", "mask_zero"), (MaskAfterSoftmax, "h0.weights", "mask_after"),
          (InterleavedPairs, "kv0.k_rot", "rope_pairs"), (TurnsTheOtherWay, "kv0.k_rot", "rope_sign"),
          (GroupsRepeated, "h1.scores", "gqa_repeat"), (NoOutputProjection, "out", "no_w_o"),
          (NoOutputBias, "out", "no_b_o"), (ValuesFromKeys, "kv0.v", "values_from_keys"),
          (LinearStyleWeights, "kv0.k", "transposed_w_k")]
AT_THE_OUTPUT = {"transposed_w_k": "transposed_w_qkv"}   # the first step shows W_K's; the output all three

def test_the_correct_student_matches_every_step(layer):
    answers = Student(layer).steps()
    got = tracer.check(layer, answers)
    assert got.ok and got.cause is None and got.matching == got.given == len(answers) == 36


@pytest.mark.parametrize("student, step, cause", CORPUS, ids=[c[2] for c in CORPUS])
def test_each_mistake_is_named_where_it_first_shows(layer, student, step, cause):
    answers = student(layer).steps()
    got = tracer.check(layer, answers)
    assert (got.first["step"], got.cause) == (step, cause), got.report()
    trace = tracer.run(layer)
    r, c = got.first["row"], got.first["col"]
    assert got.first["expected"] == trace[step][r, c]
    assert got.first["yours"] == pytest.approx(float(answers[step][r, c]))
    assert got.first["explain"] == trace.explain(step, r, c)
    assert got.matching < got.given


@pytest.mark.parametrize("student, step, cause", CORPUS, ids=[c[2] for c in CORPUS])
def test_given_only_the_output_the_cause_is_still_found(layer, student, step, cause):
    got = tracer.check(layer, {"out": student(layer).steps()["out"]})
    assert (got.first["step"], got.cause) == ("out", AT_THE_OUTPUT.get(cause, cause)), got.report()


def test_a_student_who_transposes_w_q_only(layer):
    class TransposedQuery(Student):
        def steps(self):
            self.w_q = self.w_q.transpose(1, 2)
            return super().steps()
    got = tracer.check(layer, TransposedQuery(layer).steps())
    assert (got.first["step"], got.cause) == ("h0.q", "transposed_w_q")


def test_a_float64_answer_is_held_to_float64(layer):
    right = {sid: a.double() for sid, a in Student(layer).steps().items()}
    assert not tracer.check(layer, right).ok          # float32 arithmetic, dressed as float64: too far
    exact = tracer.run(layer)
    nudged = exact["out"] * (1 + 1e-6)               # a millionth off: float32's rounding, not float64's
    got = tracer.check(layer, {"out": nudged, "h0.weights": exact["h0.weights"]})
    assert (got.first["step"], got.cause) == ("out", "unknown") and got.matching == 1
    assert tracer.check(layer, {"out": nudged.astype(np.float32)}).ok   # float32: within √ε of it
