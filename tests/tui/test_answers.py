"""The quiz's rules without a screen: which typed forms are answers, when one is right (exactly or
to the precision typed), hints that never state the value, and the score. Values are written here."""
import math
import re
from fractions import Fraction

import pytest

import tracer
from tracer.answers import FORMS, NotAnAnswer, is_right, parse
from tui.hints import hint
from tui.quiz import Quiz, quiz_steps

W = 27 / 46   # the classroom sheet's h0.weights[k2, q1]


@pytest.mark.parametrize("typed, value", [("3", Fraction(3)), ("−2", Fraction(-2)), ("-2", Fraction(-2)),
                                          ("27/46", Fraction(27, 46)), (" 0.59 ", Fraction(59, 100)),
                                          ("0,5", Fraction(1, 2)), ("1e-3", Fraction(1, 1000)),
                                          ("-inf", -math.inf), ("−∞", -math.inf), ("inf", math.inf)])
def test_accepted_forms(typed, value):
    assert parse(typed).value == value


@pytest.mark.parametrize("junk", ["", "abc", "1/0", "1..2", "--2", "1/2/3", "2/", "x1", "9" * 100,
                                  "1e99999", "½", "0x10", "nan", "1 2 3e"])
def test_junk_says_what_is_accepted(junk):
    with pytest.raises(NotAnAnswer) as err:
        parse(junk)
    assert "27/46" in str(err.value) and "0.59" in str(err.value)
    assert FORMS in str(err.value)


@pytest.mark.parametrize("typed, right", [("0.59", True), ("0.6", True), ("0.58", False), ("27/46", True),
                                          ("54/92", True), ("0.587", True), ("0.5870", True), ("0.5869", False),
                                          ("1", False), ("0", False), ("0.0", False), ("26/46", False),
                                          ("0.5869565217391304", True), ("-inf", False)])
def test_right_to_the_precision_typed(typed, right):
    assert is_right(parse(typed), W) is right


def test_exact_forms_need_the_exact_value():
    assert is_right(parse("12"), 12.0) and not is_right(parse("12"), 12.3)
    assert not is_right(parse("0.0"), 1 / 46) and is_right(parse("0.02"), 1 / 46)
    assert is_right(parse("−∞"), -math.inf) and not is_right(parse("inf"), -math.inf)
    assert not is_right(parse("0"), -math.inf) and not is_right(parse("1"), math.nan)


def _written(value: float) -> set[str]:
    """Ways a value can be written: small fractions, 3 and 4 significant digits, 3 places."""
    if math.isinf(value):
        return {"−∞", "-∞", "-inf", "∞"} if value < 0 else {"∞", "inf"}
    out = {f"{value:.3g}", f"{value:.4g}", f"{value:.3f}", f"{value:.2f}"}
    f = Fraction(value).limit_denominator(1000)
    if abs(float(f) - value) < 1e-12:
        out.add(f"{f.numerator}/{f.denominator}" if f.denominator > 1 else str(f.numerator))
    return {t.replace("-", "−") for t in out} | out


def _stated(text: str) -> list[str]:
    """What a text says something equals: each piece after `=` or `≈`, up to the next one."""
    return [p.strip() for p in re.split(r" = |≈|;|   \(|\)", text)[1:] if p.strip()]


CASES = [("by_hand", "by-hand"), ("by_hand", "exact"), ("gpt_causal", None), ("multi_head", None),
         ("low_rank", None), ("residual_norm", None), ("toy_dk4", "by-hand")]


@pytest.mark.parametrize("name, preset", CASES)
def test_no_hint_states_its_cells_value(name, preset):
    trace = tracer.run(tracer.load_scenario(name), preset)
    checked = 0
    for sid in quiz_steps(trace):
        a = trace[sid]
        for r in range(min(a.shape[0], 4)):
            for c in range(min(a.shape[1], 4)):
                value = float(a[r, c])
                for level in (1, 2):
                    for fractions in (True, False):
                        text = hint(trace, sid, r, c, level, fractions, typed=parse("123.5"))
                        said = _stated(text)
                        assert not set(said) & _written(value), (sid, r, c, text)
                        assert not any(text.endswith(" " + w) for w in _written(value)), (sid, text)
                        checked += 1
    assert checked > 100


def test_hints_are_the_formula_with_inputs_then_finer():
    trace = tracer.run(tracer.load_scenario("by_hand"))
    first = hint(trace, "h0.weights", 1, 0, 1, typed=parse("0.58"))
    assert first == "h0.weights[key x2, query x1] = 9 ÷ (46/3)   (how much x1 attends to x2)"
    second = hint(trace, "h0.weights", 1, 0, 2, typed=parse("0.58"))
    assert second.startswith(first) and "9 × 3/46" in second and "too small" in second
    assert hint(trace, "h0.scores", 1, 0, 1) == "h0.scores[key x2, query x1] = k(x2)·q(x1) = 2×2 + 1×0 + 0×3"


def test_the_score_counts_first_time_after_a_hint_and_revealed():
    trace = tracer.run(tracer.load_scenario("by_hand"))
    quiz = Quiz(trace, quiz_steps(trace, ["h0.sums", "h0.weights"]))
    assert quiz.steps == ["h0.sums", "h0.weights"] and quiz.progress("h0.sums") == (0, 4)
    assert quiz.answer("h0.sums", 0, 0, "46/3").ok is True
    assert quiz.answer("h0.sums", 0, 1, "9").ok is False
    assert quiz.answer("h0.sums", 0, 1, "abc").ok is None          # junk: no try counted
    assert quiz.answer("h0.sums", 0, 1, "28/3").ok is True
    assert quiz.answer("h0.sums", 0, 2, "7.33").ok is True
    last = quiz.reveal("h0.sums", 0, 3)
    assert last.opened == "h0.weights" and "3 of 4 cells right, 1 revealed" in last.message
    for r in range(4):
        for c in range(4):
            end = quiz.reveal("h0.weights", r, c)
    assert end.finished
    assert quiz.counts() == {"right first time": 2, "right after a hint": 1, "revealed": 17, "still hidden": 0}
    assert quiz.hardest() == [("h0.sums", 1)]
    assert "most mistakes in h0.sums (1)" in end.message


def test_steps_asked_are_checked():
    trace = tracer.run(tracer.load_scenario("by_hand"))
    assert quiz_steps(trace)[0] == "h0.q" and "x" not in quiz_steps(trace)
    for bad in (["x"], ["h7.q"]):
        with pytest.raises(tracer.ScenarioError, match="--step"):
            quiz_steps(trace, bad)
