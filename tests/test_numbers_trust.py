"""Numbers a student can trust: fractions only for exact results of exact inputs, one rule of
significant digits, a nonzero value never written as 0, and no −0 in any export."""
import json
import re

import numpy as np

import tracer
import tracer.export
from tracer.printing import exact_values, fmt
from tui.cli import main

FRACTION = re.compile(r"\d/\d")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_float32_noise_is_written_in_decimals_not_fractions(capsys):
    code, out, _ = run(capsys, "show", "gpt2_small", "--arithmetic", "by-hand", "--set", "scale=3",
                       "--step", "h0.sums")
    assert code == 0 and not FRACTION.search(out), out
    code, out, _ = run(capsys, "show", "gpt2_small", "--arithmetic", "by-hand", "--set", "scale=3",
                       "--explain", "h0.sums", "30", "0")
    assert code == 0 and not FRACTION.search(out), out


def test_exact_inputs_under_rational_arithmetic_keep_their_fractions(capsys):
    code, out, _ = run(capsys, "show", "by_hand", "--step", "h0.weights")
    assert code == 0 and "27/46" in out


def test_exact_values_tells_typed_numbers_from_data():
    assert exact_values(np.array([[2.0, -1.0, 0.5, 1 / 3]]))
    assert not exact_values(np.random.default_rng(0).standard_normal((8, 8)))
    assert not exact_values(np.array([[0.1234567891]]))


def test_one_rule_of_significant_digits():
    assert fmt(15.03, fractions=False) == "15.03"          # not 15
    assert fmt(0.45003, fractions=False) == "0.4500"        # beside 0.2530: the same precision
    assert fmt(0.253, fractions=False) == "0.253"           # exactly 0.253
    assert fmt(27 / 46, fractions=False) == "0.5870"


def test_a_nonzero_value_is_never_written_as_zero():
    assert fmt(4.2e-18) == "4.2e−18"
    assert fmt(5e-324) != "0" and "/" not in fmt(1e-300)
    assert fmt(2.9999999999999996) == "3"                   # a rounding of 3 under exact inputs


def test_exports_never_write_minus_zero(tmp_path):
    x = np.array([[-0.0, 1.0], [1.0, -0.0]])
    eye = np.eye(2)
    trace = tracer.run(tracer.from_arrays(x=x, q=eye, k=eye, v=eye))
    assert np.signbit(trace["x"]).any()  # the input keeps its −0.0
    for ext in ("json", "csv", "md"):
        path = tmp_path / f"t.{ext}"
        tracer.export.write_export(trace, path)
        text = path.read_text(encoding="utf-8")
        assert "-0.0" not in text and "−0" not in text and not re.search(r"(?<![\d.e])-0(?![.\d])", text), ext
    tracer.export.write_export(trace, tmp_path / "t.npz")
    with np.load(tmp_path / "t.npz", allow_pickle=False) as z:
        assert not np.signbit(z["x"][z["x"] == 0]).any()


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=300)
@given(st.text(max_size=40), st.floats(allow_nan=True, allow_infinity=True))
def test_any_typed_text_is_judged_or_refused_never_an_error(text, value):
    from tracer.answers import NotAnAnswer, below, is_right, parse
    try:
        answer = parse(text)
    except NotAnAnswer:
        return
    is_right(answer, value)
    below(answer, value)


@given(st.sampled_from(["1e309", "-1e309", "2e308", "17976931348623159e292", "-2e308/1"[:-2]]))
def test_beyond_float64_is_out_of_range(text):
    import pytest
    from tracer.answers import NotAnAnswer, parse
    with pytest.raises(NotAnAnswer, match="out of range"):
        parse(text)


def test_a_small_value_is_a_fraction_only_to_its_own_relative_precision():
    """1.8816728823994597e-06 lies 3e-11 (relative) from 1/531442: a by-hand value whose true
    denominator is beyond the limit, not that fraction; within float64's 1e-15 absolute it read as
    one. The fraction itself, and a true by-hand fraction of a larger value, still read as such."""
    from fractions import Fraction

    from tracer.printing import RESULT_DENOMINATOR, as_fraction
    assert as_fraction(1.8816728823994597e-06, limit=RESULT_DENOMINATOR) is None
    assert as_fraction(1 / 531442, limit=RESULT_DENOMINATOR) == Fraction(1, 531442)
    assert as_fraction(6561 / 7381, limit=RESULT_DENOMINATOR) == Fraction(6561, 7381)
    assert as_fraction(0.0) == 0 and as_fraction(4.2e-18) is None
