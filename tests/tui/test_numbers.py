"""The weights step of by_hand shows exactly the worksheet's numbers under both arithmetics,
computed here from the scenario file alone: exact fractions for by-hand, NumPy for exact."""
import math
import tomllib
from fractions import Fraction
from pathlib import Path

import numpy as np

from tui.widgets.cell_info import CellInfo
from tui.widgets.matrix import MatrixView

from tui_helpers import drawn, go_to, opened, pilot_test, settle, status_text

FILE = Path(__file__).resolve().parents[2] / "scenarios" / "by_hand.toml"


def worksheet():
    data = tomllib.loads(FILE.read_text(encoding="utf-8"))
    x = data["x"]                                  # d_model × tokens
    w = data["weights"]
    mul = lambda a, b: [[sum(a[i][m] * b[m][j] for m in range(len(b))) for j in range(len(b[0]))]  # noqa: E731
                        for i in range(len(a))]
    q, k = mul(w["q"], x), mul(w["k"], x)          # d_k × tokens
    kt = [list(col) for col in zip(*k)]
    return mul(kt, q)                              # key × query, as the worksheet writes KᵀQ


def by_hand_weights():
    s = worksheet()
    powers = [[Fraction(3) ** math.floor(Fraction(v, 2)) for v in row] for row in s]
    sums = [sum(powers[key][query] for key in range(4)) for query in range(4)]
    return [[powers[key][query] / sums[query] for query in range(4)] for key in range(4)]


def exact_weights():
    s = np.array(worksheet(), dtype=float) / math.sqrt(3)
    e = np.exp(s - s.max(axis=0))
    return e / e.sum(axis=0)


def number(text: str) -> float:
    return float(Fraction(text.replace("−", "-")))


def test_the_worksheet_column_of_q1():
    q1 = [row[0] for row in by_hand_weights()]
    assert q1 == [Fraction(9, 46), Fraction(27, 46), Fraction(1, 46), Fraction(9, 46)]


@pilot_test
async def test_weights_by_hand_are_shown_as_exact_fractions():
    async with opened() as (app, pilot):
        await go_to(pilot, "h0.weights")
        lines = drawn(app.screen.query_one("#current", MatrixView))
        assert lines[0] == ["x1", "x2", "x3", "x4"]
        expected = by_hand_weights()
        for key in range(4):
            assert lines[key + 1][0] == f"x{key + 1}"
            shown = lines[key + 1][1:]
            assert [Fraction(t) for t in shown] == expected[key]   # 27/46 as text; 0.75 is 3/4 exactly
        await pilot.press("j")                     # key x2, query x1: the worksheet's 27/46
        assert "= 27/46" in str(app.screen.query_one(CellInfo).render())


@pilot_test
async def test_weights_exact_after_swapping_show_the_softmax():
    async with opened() as (app, pilot):
        await go_to(pilot, "h0.weights")
        await pilot.press("a")
        await settle(pilot)
        assert "arithmetic exact" in status_text(app) and app.screen.step_id == "h0.weights"
        lines = drawn(app.screen.query_one("#current", MatrixView))
        expected = exact_weights()
        for key in range(4):
            shown = np.array([number(t) for t in lines[key + 1][1:]])
            np.testing.assert_allclose(shown, expected[key], rtol=5e-3)   # 3 significant digits
        story = str(app.screen.query_one(CellInfo).render())
        assert f"{expected[0, 0]:.4g}" in story                         # the panel gives 4
