"""Hints for a wrong answer, built from a cell's provenance (`trace.explain`): its formula with
its inputs, then a finer one; never the value itself, in any form the screen writes it."""
from __future__ import annotations

import math
import re
from fractions import Fraction

from tracer.answers import Answer, NotAnAnswer, below, is_right, parse
from tracer.printing import fmt, tolerance
from tracer.steps import KINDS

NOTE = "   ("   # explain puts a remark after three spaces, in parentheses
_NUMBER = re.compile(r"(?<![\w/.^])[−-]?(?:\d+(?:\.\d+)?(?:e[−-]?\d+)?(?:/\d+)?|∞)(?![\w/.])")


def written(value: float, tol: float) -> set[str]:
    """Every way the screen writes this value: fraction, decimals at 3 and 4 digits, 3 places."""
    forms = {fmt(value, True, tol=tol), fmt(value, False, tol=tol), fmt(value, True, digits=3, tol=tol),
             fmt(value, False, digits=3, tol=tol)}
    if math.isfinite(value):
        forms.add(f"{value:.3f}".replace("-", "−"))
    return forms


def states_value(text: str, value: float, tol: float) -> bool:
    """Whether `text` is, as a whole (or on either side of ≈), a number that equals the value:
    copying it would be a right answer."""
    for piece in text.split("≈"):
        try:
            if is_right(parse(piece), value, tol):
                return True
        except NotAnAnswer:
            continue
    return False


def mentions_value(text: str, value: float, tol: float) -> bool:
    """Whether any number standing in `text` equals the value (stricter than states_value)."""
    return any(states_value(m.group(0), value, tol) for m in _NUMBER.finditer(text))


def split_story(story: str) -> tuple[str, list[str], str]:
    """`label = a = b = value   (note)` → (label, [a, b, value], note)."""
    body, _, note = story.partition(NOTE)
    parts = body.split(" = ")
    return parts[0], parts[1:], note.removesuffix(")")


def hint(trace, step_id: str, row: int, col: int, level: int, fractions: bool = True,
         typed: Answer | None = None) -> str:
    """Level 1: the cell's formula with its inputs. Level 2 adds the products worked out (when
    they do not give the value away), what to do with the inputs, and whether the last answer
    was too small or too large."""
    value = float(trace[step_id][row, col])
    tol = tolerance(trace.dtype)
    step = trace.step(step_id)
    label, parts, note = split_story(trace.explain(step_id, row, col, fractions=fractions))
    kept = [p for p in parts if not states_value(p, value, tol)]
    while len(kept) > 1 and states_value(kept[-1].split(" ")[-1], value, tol):
        kept.pop()  # `2 ÷ √2 = 2 ÷ 1.414`: the divisor happens to be the value; `2 ÷ √2` says enough
    if kept:
        text = f"{label} = {' = '.join(kept)}"
    elif not mentions_value(step.formula, value, tol):
        text = f"{label}: {step.formula}"
    else:
        text = f"{label}: computed from {', '.join(step.inputs)}"
    if note and not mentions_value(note, value, tol):
        text += f"   ({note})"
    if level < 2:
        return text
    finer = [worked(p) for p in kept]
    finer = [f for f in finer if f and not mentions_value(f, value, tol)]
    # what to do with the inputs, in words only (no example can equal a value); a key block's
    # scores and sums take the whole step's words
    tip = (KINDS[step.kind] if step.kind in KINDS else step.spec).tip
    if tip and not mentions_value(tip, value, tol):
        finer.append(tip)
    side = below(typed, value) if typed is not None else None
    if side is not None and math.isfinite(value):
        finer.append("your answer is too small" if side else "your answer is too large")
    return "; ".join([text] + finer)


def worked(part: str) -> str | None:
    """A sum of products `2×2 + 1×0 + 0×3` with each product worked out (`4 + 0 + 0`), when at
    least two are not 0 (so the student still adds); a division by a fraction `9 ÷ (46/3)` as a
    product `9 × 3/46`. None for anything else."""
    terms = part.split(" + ")
    if len(terms) > 1 and all(t.count("×") == 1 for t in terms):
        try:
            products = [_number(a) * _number(b) for a, b in (t.split("×") for t in terms)]
        except (NotAnAnswer, TypeError):
            return None
        if sum(p != 0 for p in products) < 2:
            return None
        return "products " + " + ".join(_show(p) for p in products)
    left, sep, right = part.partition(" ÷ ")
    right = right.strip()
    if right.startswith("(") and right.endswith(")"):
        right = right[1:-1]   # `9 ÷ (46/3)`: the parentheses only say what is divided by
    if sep and "/" in right and " " not in right:
        try:
            inverse = 1 / _number(right)
        except (NotAnAnswer, TypeError, ZeroDivisionError):
            return None
        return f"{left} × {_show(inverse)}"
    return None


def _number(text: str) -> Fraction:
    answer = parse(text)
    if not isinstance(answer.value, Fraction):
        raise TypeError("not a finite number")
    return answer.value


def _show(value: Fraction) -> str:
    return fmt(float(value), True, tol=1e-12)  # 45/7 and 3/4 stay fractions, as the tables write them
