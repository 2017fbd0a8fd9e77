"""Generated cases for the classroom's pieces: a cell is read as a small fraction exactly when it is
one (Fractions here), a student's scenario text reads back as written (tomllib), and any seed gives
sheets whose every cell, recomputed with Fractions from the student's file, is pencil-sized."""
from __future__ import annotations

import math
import tomllib
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tracer
from test_classroom import by_hand
from tracer.classroom import tomltext, variants
from tracer.scenario.files import read_toml, resolve_path


@settings(max_examples=200, deadline=None)
@given(st.integers(-300_000, 300_000), st.integers(1, 400))
def test_a_cell_is_a_small_fraction_exactly_when_it_is_one(top, bottom):
    exact = Fraction(top, bottom)
    value = top / bottom
    want = exact if exact.denominator <= 243 and abs(exact) <= 1000 else None
    assert variants.as_fractions(np.array([[value]])) == [want]


def test_cells_that_are_no_small_fraction():
    cells = np.array([[-np.inf, np.inf, np.nan, 1 / 3 + 1e-9, 3.0 ** -6, 1000.0, 1000.5, 3.0 ** -5]])
    assert variants.as_fractions(cells) == [-math.inf, None, None, None, None, Fraction(1000), None, Fraction(1, 243)]


NAME = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
SCALAR = st.one_of(st.text(max_size=30), st.integers(-10**6, 10**6), st.booleans(),
                   st.floats(allow_nan=False, allow_infinity=False, width=64))
MATRIX = st.integers(1, 4).flatmap(lambda c: st.lists(st.lists(st.integers(-20, 20), min_size=c, max_size=c),
                                                      min_size=1, max_size=4))
VALUE = st.one_of(SCALAR, MATRIX, st.lists(MATRIX, min_size=1, max_size=3), st.lists(st.text(max_size=8), max_size=4))


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(NAME, st.one_of(VALUE, st.dictionaries(NAME, VALUE, max_size=4)), max_size=6),
       st.text(max_size=40))
def test_a_student_file_reads_back_as_written(doc, comment):
    text = tomltext.dumps(doc, comment)
    assert tomllib.loads(text) == doc


@settings(max_examples=6, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from(["by_hand", "gpt_causal"]))
def test_any_seed_gives_pencil_sized_sheets(seed, name):
    scenario = tracer.load_scenario(name)
    original = read_toml(resolve_path(name))
    for n, (drawn, trace, cells) in enumerate(variants.variants(scenario, 2, seed, lambda s: tracer.run(s, "by-hand"))):
        doc = tomllib.loads(tomltext.dumps(tomltext.student_document(original, drawn, f"{name}-s{n}", "t")))
        for sid, m in by_hand(doc).items():
            for r, row in enumerate(m):
                for c, v in enumerate(row):
                    assert v == -math.inf or (Fraction(v).denominator <= 243 and abs(v) <= 1000), (sid, r, c, v)
                    assert trace[sid][r, c] == (v if v == -math.inf else float(v)) or \
                        math.isclose(trace[sid][r, c], v, rel_tol=1e-15), (sid, r, c)
                    assert cells[sid][r * len(row) + c] == v
