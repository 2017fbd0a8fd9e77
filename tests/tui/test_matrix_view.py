"""The matrix widget on its own: what it draws (labels, numbers, −∞), the cursor, and that a
2048 × 2048 matrix draws only its visible window with the labels still in view."""
import math

import numpy as np
import pytest
from textual.app import App

from tui.widgets.heat import Scale, text
from tui.widgets.matrix import MatrixView

from tui_helpers import drawn, pilot_test


class One(App):
    def __init__(self):
        super().__init__()
        self.moves = []

    def compose(self):
        yield MatrixView(cursor=True, id="m")

    def on_matrix_view_cursor_moved(self, message):
        self.moves.append((message.row, message.col))


def labels(n, prefix="t"):
    return [f"{prefix}{i + 1}" for i in range(n)]


def test_cell_text_fractions_decimals_and_infinity():
    assert text(27 / 46, True, False, 1e-9) == "27/46"
    assert text(27 / 46, False, False, 1e-9) == "0.5870"   # four significant digits, as show writes
    assert text(-1 / 3, False, False, 1e-9) == "−0.3333"
    assert text(-math.inf, True, False, 1e-9) == "−∞"
    assert text(12.0, False, True, 1e-9) == "12"


def test_scale_diverges_around_zero_and_is_per_matrix():
    signed = Scale(np.array([[-2.0, 0.0, 1.0]]), True)
    assert signed.signed and signed.level(-2.0) == -signed.level(2.0) and signed.level(0.0) == 0
    positive = Scale(np.array([[1.0, 3.0]]), True)
    assert not positive.signed and positive.level(1.0) == 0 and positive.level(3.0) > 0
    assert Scale(np.array([[10.0, 30.0]]), True).level(30.0) == positive.level(3.0)


def test_large_matrices_without_fractions_skip_the_fraction_search():
    a = np.random.default_rng(0).standard_normal((64, 64))
    assert not Scale(a, True).fractions
    thirds = np.arange(64 * 64).reshape(64, 64) / 3
    scale = Scale(thirds, True)
    assert scale.fractions and scale.text(1 / 3) == "1/3"


@pilot_test
async def test_draws_labels_numbers_and_masked_cells():
    app = One()
    async with app.run_test(size=(60, 12)) as pilot:
        view = app.query_one(MatrixView)
        a = np.array([[0.5, -math.inf], [2 / 3, 1 / 3]])
        view.show(a, ["q1", "q2"], ["k1", "k2"], title="scores")
        await pilot.pause()
        lines = drawn(view)
        assert lines[0] == ["k1", "k2"]
        assert lines[1] == ["q1", "1/2", "−∞"]   # one rule: a fraction, as 2/3 beside it
        assert lines[2] == ["q2", "2/3", "1/3"]
        view.show(a, ["q1", "q2"], ["k1", "k2"], fractions=False)
        await pilot.pause()
        assert drawn(view)[2] == ["q2", "0.6667", "0.3333"]


@pilot_test
async def test_cursor_moves_clamps_and_reports():
    app = One()
    async with app.run_test(size=(60, 12)) as pilot:
        view = app.query_one(MatrixView)
        view.show(np.zeros((3, 4)), labels(3), labels(4))
        view.focus()
        await pilot.press("l", "l", "j", "right", "down", "down")
        await pilot.pause()
        assert view.cursor == (2, 3)            # clamped at the last row: no message for that press
        assert app.moves == [(0, 1), (0, 2), (1, 2), (1, 3), (2, 3)]
        await pilot.press("h", "k", "left", "up")
        assert view.cursor == (0, 1)
        await pilot.press("end")
        assert view.cursor == (0, 3)
        await pilot.press("home")
        assert view.cursor == (0, 0)


@pilot_test
async def test_a_click_puts_the_cursor_on_the_cell():
    app = One()
    async with app.run_test(size=(60, 12)) as pilot:
        view = app.query_one(MatrixView)
        view.show(np.zeros((3, 4)), labels(3), labels(4))
        await pilot.pause()
        left, top = view.styles.gutter.left, view.styles.gutter.top
        label_w, cw = view._label_w, view.cell_width
        await pilot.click(MatrixView, offset=(left + label_w + 2 * cw + 1, top + 1 + 1))
        assert view.cursor == (1, 2)                   # row 2 (after the label line), column 3
        await pilot.click(MatrixView, offset=(left + 1, top + 3))   # on a row label: ignored
        assert view.cursor == (1, 2)


@pytest.mark.parametrize("n", [4, 2048])
@pilot_test
async def test_big_matrices_draw_only_the_window_and_keep_labels(n):
    app = One()
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(MatrixView)
        a = np.arange(n * n, dtype=np.float64).reshape(n, n)
        view.show(a, labels(n, "q"), labels(n, "k"))
        view.focus()
        await pilot.pause()
        await pilot.press("end", "pagedown", "pagedown")
        await pilot.pause()
        r, c = view.cursor
        assert c == n - 1
        lines = drawn(view)
        width = view.scrollable_content_region.width
        assert all(view.render_line(y).cell_length == width for y in range(len(lines)))
        assert lines[0][-1] == f"k{n}"              # the last column's label is in view
        row = next(line for line in lines[1:] if line and line[0] == f"q{r + 1}")
        assert row[-1] == str(r * n + n - 1)         # its row label sits beside its numbers
        if n > 100:
            assert len(lines[0]) < 20                # only the visible columns were drawn


def test_float32_noise_is_not_written_as_fractions():
    from tracer.printing import tolerance
    a = np.random.default_rng(1).standard_normal((32, 32)).astype(np.float32) * 10
    scale = Scale(a, True, tolerance(np.float32))
    assert not any("/" in scale.text(v) for v in a.ravel())


@pilot_test
async def test_kept_lines_follow_every_change_of_what_is_drawn():
    """Drawn lines are kept between frames: a new array of the same shape, lit cells, hidden cells
    and the cursor each show at once, and what is not drawn from them (a border) costs no redraw."""
    app = One()
    async with app.run_test(size=(60, 12)) as pilot:
        view = app.query_one(MatrixView)
        view.show(np.full((3, 3), 2.0), labels(3), labels(3))
        await pilot.pause()
        assert drawn(view)[1] == ["t1", "2", "2", "2"]
        view.show(np.full((3, 3), 5.0), labels(3), labels(3))   # same shape: no re-layout
        await pilot.pause()
        assert drawn(view)[1] == ["t1", "5", "5", "5"]
        view.set_hidden(np.eye(3, dtype=bool))
        await pilot.pause()
        assert drawn(view)[2] == ["t2", "5", "?", "5"]
        lit = list(view.render_line(3))
        view.set_lit([(2, 0)])
        await pilot.pause()
        assert list(view.render_line(3)) != lit   # the lit cell's colour
        redrawn = []
        view.refresh = lambda *a, **k: redrawn.append((a, k))
        view._mark_more()
        view._clip_title()
        assert redrawn == []                    # the same border text set again draws nothing


@pilot_test
async def test_an_app_leaves_nothing_frozen_when_it_ends():
    """The command line's app sets aside what is alive once a trace is shown (gc.freeze: collections
    stay short); when it ends, all of it is collectable again. An app opened among many (a test
    run's) sets nothing aside."""
    import gc

    from tui.app import AttnApp
    from tui_helpers import settle
    for freeze in (True, False):
        before = gc.get_freeze_count()   # what the test run set aside itself (conftest)
        async with AttnApp("by_hand", freeze=freeze).run_test() as pilot:
            await settle(pilot)
            await pilot.pause()
            assert (gc.get_freeze_count() > before) if freeze else gc.get_freeze_count() == before
        # an app that set aside gives back all it can (gc.unfreeze: the run's own too); one that did not leaves them
        assert gc.get_freeze_count() == (0 if freeze else before)
