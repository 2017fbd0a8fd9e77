"""The one rule for most-attended keys, axis names and when numbers are written as fractions,
against cases worked out by hand here."""
import numpy as np

import tracer
from tracer.labels import axis_labels, top_keys
from tracer.printing import rational


def test_top_keys_ties_and_all_masked_queries():
    w = np.array([[0.25, 0.25, 0.5, 0.0],          # one winner
                  [9 / 28, 9 / 28, 1 / 28, 9 / 28],  # a three-way tie, as by-hand weights tie
                  [0.0, 0.0, 0.0, 0.0],            # every key masked: no most-attended key
                  [0.4, 0.4 * (1 - 1e-6), 0.2, 0.0]])  # close, but not a tie
    assert top_keys(w) == [[2], [0, 1, 3], [], [0]]


def test_the_cli_diff_and_the_tui_diff_name_the_same_keys():
    from tui.screens.diff import top_keys_changed
    from tui.tables import diff_rows
    a, b = tracer.run("by_hand", "by-hand"), tracer.run("by_hand", "exact")
    wa, wb = a.rows("h0.weights"), b.rows("h0.weights")
    changed = top_keys_changed(wa, wb)
    assert changed  # the two arithmetics disagree somewhere on this exercise
    note = next(n for sid, _, n in diff_rows(a, b) if sid == "h0.weights")
    tokens = a.scenario.tokens
    for q, _, keys in changed:
        assert f"{tokens[q]}: " in note and ",".join(tokens[k] for k in keys) in note


def test_axis_labels():
    t = tracer.run("by_hand")
    assert axis_labels(t, "query", 4) == ["x1", "x2", "x3", "x4"]
    assert axis_labels(t, "one", 1) == ["Σ"] and axis_labels(t, "d_k", 3) == ["0", "1", "2"]


def test_axis_labels_named_once_per_trace_are_each_traces_own():
    """Kept per trace (a large step names its tokens for every panel): each call gets a list of its
    own, each trace its own tokens, a start, a size and a width their own names."""
    a = tracer.run(tracer.from_arrays(np.eye(3), [np.eye(3)], [np.eye(3)], [np.eye(3)], tokens=["la", "la", "wwwwwwwwww"]))
    b = tracer.run(tracer.from_arrays(np.eye(3), [np.eye(3)], [np.eye(3)], [np.eye(3)], tokens=["x", "y", "z"]))
    first = axis_labels(a, "key", 3)
    first.append("changed by the caller")
    assert axis_labels(a, "key", 3) == ["la#0", "la#1", "wwwwwwwwww"]
    assert axis_labels(b, "key", 3) == ["x", "y", "z"]
    assert axis_labels(a, "key", 2, start=1) == ["la#1", "wwwwwwwwww"]
    assert axis_labels(a, "key", 3, width=6) == ["la#0", "la#1", "www…#2"]


def test_fractions_only_where_the_arithmetic_stays_rational():
    ar = lambda preset, **kw: tracer.resolve(preset, kw)  # noqa: E731
    assert rational(ar("by-hand"), 3)                    # ⌊÷2⌋ and 3ˣ
    assert not rational(ar("exact"), 64)                 # eˣ
    assert not rational(ar("exact", softmax_base=3.0), 3)   # ÷√3
    assert rational(ar("exact", softmax_base=3.0), 4)    # ÷√4 = ÷2
    assert rational(ar("exact", normalize="relu"), 4)
