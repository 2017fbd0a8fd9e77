"""One number, one printing: equal values print equal within a table (show, md, pictures, the TUI
all use tracer.printing.table_writer), exact values follow one rule (3/4, never 0.75 beside 27/46),
decimals keep four significant digits (9.420e−07), and a division by a fraction reads unambiguously."""
from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import numpy as np
from hypothesis import given, settings, strategies as st

import tracer
from tracer import printing
from tracer.printing import fmt
from tui.hints import hint
from tui.tables import step_table

ROOT = Path(__file__).resolve().parents[1]
DIVIDED_BY_A_BARE_FRACTION = re.compile(r"÷ −?\d+/\d+")


def cells(table: str) -> list[list[str]]:
    """The number cells of a `show` table (its title and header lines dropped)."""
    return [line.split()[1:] for line in table.splitlines()[2:]]


def four_digits(text: str) -> str:
    """The number a text denotes, at four significant digits, written another way than the code's."""
    return f"{float(Fraction(text.replace('−', '-'))):.3e}"


def test_the_rope_diagonal_prints_one_way():
    trace = tracer.run(tracer.load_scenario("rope"), "exact")
    for sid in ("h0.scores", "h0.scaled"):
        rows = cells(step_table(trace, trace.step(sid)))
        diagonal = {rows[i][i] for i in range(len(rows))}
        assert len(diagonal) == 1, (sid, diagonal)   # 2 2 2 2.000 2.000 before
        for d in range(1, len(rows)):                # every other diagonal too: its distance
            assert len({rows[i][i - d] for i in range(d, len(rows))}) == 1, (sid, d)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([2.0, 1.0, 0.5, -0.75, 0.125, 3.25, 42.0]),
                          st.sampled_from([0.0, 1e-12, -3e-10, 2e-5, -4e-4])), min_size=2, max_size=30))
def test_values_printing_the_same_number_print_the_same_text(pairs):
    a = np.array([base + base * eps for base, eps in pairs])
    write = printing.table_writer(a.reshape(1, -1), fractions=False)
    seen: dict[str, str] = {}
    for v in a:
        text = write(v)
        assert float(Fraction(text.replace("−", "-"))) == float(f"{v:.4g}")   # it is the number
        assert seen.setdefault(four_digits(text), text) == text, (v, text, seen)


def test_by_hand_tables_write_exact_values_one_way():
    trace = tracer.run(tracer.load_scenario("by_hand"))
    for sid in ("h0.weights", "h0.z"):
        texts = [t for row in cells(step_table(trace, trace.step(sid))) for t in row]
        assert not [t for t in texts if "." in t], (sid, texts)   # 0.75 and 7.5 before
    assert "3/4" in step_table(trace, trace.step("h0.weights"))
    assert "15/2" in step_table(trace, trace.step("h0.z"))
    assert fmt(0.75) == "3/4" and fmt(7.5) == "15/2" and fmt(0.75, fractions=False) == "0.75"


def test_a_rounded_decimal_keeps_four_significant_digits_in_powers_of_ten_too():
    assert fmt(9.42e-07 * (1 + 1e-9), fractions=False) == "9.420e−07"
    assert fmt(1.9420001e-05, fractions=False) == "1.942e−05"
    assert fmt(9.42e-07, fractions=False) == "9.42e−07"   # exactly that: nothing rounded, nothing added


def test_a_tables_steps_are_powers_of_ten_correctly_rounded():
    """The table of 10^k that a table's rounding looks up, against exact fractions."""
    for k in range(-printing.LOWEST, 309):
        assert printing.POWERS[k + printing.LOWEST] == float(Fraction(10) ** k), k


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64).filter(lambda v: v != 0),
                min_size=1, max_size=40))
def test_a_value_rounds_to_its_four_digits_at_every_magnitude(values):
    """_rounded(v) is v at four significant digits, as Python writes it, within an ulp or two."""
    got = printing._rounded(np.array(values), 4)
    for v, r in zip(values, got.tolist()):
        want = float(f"{v:.4g}")
        if not 1e-304 <= abs(v) <= 1e307:   # a subnormal step, or a product past the largest float
            continue
        assert abs(r - want) <= 4 * np.spacing(abs(want)), (v, r, want)


def test_a_division_by_a_fraction_is_parenthesised_everywhere():
    trace = tracer.run(tracer.load_scenario("by_hand"))
    assert trace.explain("h0.weights", 1, 0).startswith("h0.weights[key x2, query x1] = 9 ÷ (46/3) = 27/46")
    for name in ("by_hand", "flash", "gqa"):
        t = tracer.run(tracer.load_scenario(name))
        for step in t.steps:
            if step.kind not in ("weights", "z"):
                continue
            for r in range(step.shape[0]):
                for c in range(step.shape[1]):
                    text = t.explain(step.id, r, c)
                    assert not DIVIDED_BY_A_BARE_FRACTION.search(text), text
                    for level in (1, 2):
                        assert not DIVIDED_BY_A_BARE_FRACTION.search(hint(t, step.id, r, c, level)), text
    assert "9 × 3/46" in hint(trace, "h0.weights", 1, 0, 2)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "9 ÷ (46/3)" in readme and not DIVIDED_BY_A_BARE_FRACTION.search(readme)


def test_a_running_max_and_rescale_are_not_labelled_sums():
    trace = tracer.run(tracer.load_scenario("flash"))
    for sid, word in (("h0.blk0.max", "max"), ("h0.blk1.rescale", "rescale")):
        title, header = step_table(trace, trace.step(sid)).splitlines()[:2]
        assert f"[query × {word}, 6 × 1]" in title and header.split() == [f"query\\{word}", word], (title, header)
    title, header = step_table(trace, trace.step("h0.blk0.sums")).splitlines()[:2]
    assert "[query × sum, 6 × 1]" in title and header.split() == ["query\\sum", "Σ"]


def test_the_md_worksheet_and_the_heatmap_print_the_rope_diagonal_one_way(tmp_path):
    from tracer.export import write_export
    from tracer.figures.common import number_writer
    trace = tracer.run(tracer.load_scenario("rope"), "exact")
    path = tmp_path / "rope.md"
    write_export(trace, path, steps=["h0.scores"])
    table = path.read_text(encoding="utf-8").split("## `h0.scores`")[1]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")][1:] for line in table.splitlines()
            if line.startswith("| **")]
    assert len(rows) == 5 and len({rows[i][i] for i in range(5)}) == 1, rows
    write = number_writer(trace, trace["h0.scores"])           # the pictures' writer
    assert len({write(trace["h0.scores"][i, i]) for i in range(5)}) == 1
