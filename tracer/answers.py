"""A student's typed answer: what forms are accepted (3, −2, 0.59, 27/46, −inf), what it means,
and whether it is right for a cell's value (exactly, or to the precision typed). The quiz and
`attnsim class grade` both judge with it, so a sheet is marked as the quiz marks it."""
from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction

FORMS = "a whole number (3, −2), a decimal (0.59), a fraction (27/46) or −inf"
MAX_LENGTH = 40      # longer than any number a cell shows
MAX_EXPONENT = 400   # beyond float64's range either way: refused, not computed
LARGEST = Fraction(sys.float_info.max)   # a cell holds a float64: anything larger cannot be its value

_INTEGER = re.compile(r"^[+-]?\d+$")
_FRACTION = re.compile(r"^[+-]?\d+/\d+$")
_DECIMAL = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$")
_INFINITY = {"inf", "infinity", "∞"}


class NotAnAnswer(ValueError):
    """Typed text that is not a number in any accepted form; the message says what is accepted."""


@dataclass(frozen=True)
class Answer:
    """A parsed answer. `value` is exact (a Fraction) or ±inf; `half_unit` is half the last
    decimal place typed (0.005 for `0.59`), None when the answer claims to be exact."""
    text: str
    value: Fraction | float
    half_unit: Fraction | None = None

    @property
    def exact(self) -> bool:
        return self.half_unit is None


def normalise(text: str) -> str:
    """The typed text in plain ASCII-ish form: minus signs, decimal commas and spaces unified."""
    out = text.strip().lower().replace("−", "-").replace("–", "-").replace(",", ".")
    return "".join(out.split())


def parse(text: str) -> Answer:
    """The answer a student typed, or NotAnAnswer saying which forms are accepted."""
    answer = _parse(text)
    if isinstance(answer.value, Fraction) and abs(answer.value) > LARGEST:
        raise NotAnAnswer(f"out of range for a cell (beyond ±1.8e308, float64's largest): type {FORMS}")
    return answer


def _parse(text: str) -> Answer:
    if not isinstance(text, str) or not text.strip():
        raise NotAnAnswer(f"type a value first: {FORMS}")
    if len(text) > MAX_LENGTH:
        raise NotAnAnswer(f"too long to be a cell's value: type {FORMS}")
    s = normalise(text)
    if (s[1:] if s[0] in "+-" else s) in _INFINITY:
        return Answer(text.strip(), -math.inf if s[0] == "-" else math.inf)
    if _INTEGER.match(s):
        return Answer(text.strip(), Fraction(int(s)))
    if _FRACTION.match(s):
        top, bottom = s.split("/")
        if int(bottom) == 0:
            raise NotAnAnswer(f"a fraction needs a denominator other than 0: type {FORMS}")
        return Answer(text.strip(), Fraction(int(top), int(bottom)))
    if _DECIMAL.match(s):
        try:
            d = Decimal(s)
        except InvalidOperation:  # the pattern admits nothing Decimal refuses, but never crash
            raise NotAnAnswer(f"not a number: type {FORMS}") from None
        exponent = d.as_tuple().exponent
        if abs(d.adjusted()) > MAX_EXPONENT or abs(exponent) > MAX_EXPONENT:
            raise NotAnAnswer(f"out of range for a cell: type {FORMS}")
        return Answer(text.strip(), Fraction(d), Fraction(1, 2) * Fraction(10) ** exponent)
    raise NotAnAnswer(f"“{text.strip()}” is not a number: type {FORMS}")


def is_right(answer: Answer, value: float, tol: float = 1e-15) -> bool:
    """Right when equal (within the dtype's rounding, `tol` relative), or, for a decimal, equal to
    the value rounded to the places typed (`0.59` and `0.6` for 27/46, not `0.58`). A decimal
    that is 0 is not right for a value that is not (`0.0` gives no digit of 1/46)."""
    value = float(value)
    if math.isnan(value):
        return False
    if math.isinf(value) or isinstance(answer.value, float):
        return answer.value == value
    slack = Fraction(tol) * max(1, abs(Fraction(value)))
    gap = abs(answer.value - Fraction(value))
    if answer.exact:
        return gap <= slack
    if answer.value == 0 and abs(value) > tol:
        return False
    return gap <= answer.half_unit + slack


def below(answer: Answer, value: float) -> bool | None:
    """Whether the answer is below the value (None when equal or not comparable)."""
    value = float(value)
    if math.isnan(value):
        return None
    if math.isinf(value) or isinstance(answer.value, float):
        return None if float(answer.value) == value else float(answer.value) < value
    exact = Fraction(value)   # compared exactly: a huge or tiny answer never overflows a float
    return None if answer.value == exact else answer.value < exact
