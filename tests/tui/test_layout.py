"""The main screen at every size: at 80 × 24 the current step's panel is whole (the causal triangle
of gpt_causal), a cut panel says what is out of sight; at 140 × 45 small matrices leave no hole."""
import pytest
from hypothesis import given
from hypothesis import strategies as st
from textual.geometry import Size

from tui.screens.layout import arrange, share
from tui.widgets.matrix import MatrixView

from tui_helpers import drawn, go_to, opened, pilot_test, screen_text, settle, until


def whole(view: MatrixView) -> bool:
    """Every row and column of the view's matrix is drawn, none cut."""
    rows, cols = view.array.shape
    lines = drawn(view)
    return (len(lines[0]) == cols and sum(1 for line in lines[1:] if line) == rows   # long labels end in …
            and not any("…" in word for line in lines[1:] for word in line))


# ------------------------------------------------------------ the plan on its own
sizes = st.builds(Size, st.integers(1, 400), st.integers(3, 200))


@given(st.integers(20, 300), st.integers(6, 120), sizes, st.lists(sizes, max_size=3), st.integers(0, 30))
def test_a_plan_never_overlaps_nor_leaves_the_area(width, height, current, sources, info):
    tight = [Size(max(3, s.width - 20), s.height) for s in sources]   # titles cut to their step's name
    plan = arrange(width, height, current, sources, info, tight)
    assert plan.current.width <= width and plan.height <= height
    if plan.mode == "row":
        assert sum(s.width for s in plan.sources) + plan.current.width <= width
    elif plan.mode == "side":
        assert plan.sources[0].width + plan.current.width <= width
        assert sum(s.height for s in plan.sources) <= plan.height
    else:
        assert sum(s.width for s in plan.sources) <= width
        assert max(s.height for s in plan.sources) + plan.current.height <= plan.height
    if current.width <= width and current.height <= height - max(4, height // 3) - 4:   # the step fits
        assert plan.current.width >= current.width and plan.current.height >= current.height


@given(st.integers(1, 30), st.integers(1, 12), sizes, st.lists(sizes, max_size=3), st.integers(0, 30))
def test_a_tiny_terminal_still_gets_a_plan(width, height, current, sources, info):
    plan = arrange(width, height, current, sources, info)
    assert min(plan.current) >= 1 and all(min(s) >= 0 for s in plan.sources)


def test_at_80_columns_the_step_is_whole_and_its_sources_go_above():
    # gpt_causal's h0.weights (6 × 6, 63 wide) and its sources h0.exp and h0.sums, in 64 columns
    plan = arrange(64, 22, Size(63, 9), [Size(63, 9), Size(30, 9)], 5)
    assert plan.mode == "stack" and plan.current == Size(63, 9)
    assert sum(s.width for s in plan.sources) <= 64 and plan.height <= 22 - 4


def test_at_140_columns_a_small_step_takes_only_what_it_needs():
    # by_hand's h0.q (3 × 4) beside x and W_Q: all in one row, no 95-column panel, no rows left blank
    plan = arrange(124, 43, Size(23, 6), [Size(30, 9), Size(18, 6)], 4)
    assert plan.mode == "row" and plan.current == Size(23, 6)
    assert plan.sources == [Size(30, 9), Size(18, 6)] and plan.height == 9


def test_a_step_too_large_for_any_screen_shares_it_with_its_sources():
    plan = arrange(84, 28, Size(10_000, 1_000), [Size(9_000, 1_000), Size(20, 1_000)], 5)
    assert plan.mode == "side" and plan.sources[0].width <= 42
    assert plan.current.width + plan.sources[0].width == 84
    assert plan.height <= 28 - 28 * 2 // 5     # the words below keep two fifths


@pytest.mark.parametrize("total, wants, out", [(64, [63, 17], [47, 17]), (100, [10, 20], [10, 20]),
                                               (9, [10, 9], [5, 4])])
def test_share_gives_small_panels_all_they_want(total, wants, out):
    assert share(total, wants) == out


# ------------------------------------------------------------ the screen
@pilot_test
async def test_the_causal_triangle_is_whole_at_80_by_24():
    async with opened("gpt_causal", size=(80, 24)) as (app, pilot):
        await go_to(pilot, "h0.weights")
        current = app.screen.query_one("#current", MatrixView)
        assert whole(current)
        text = screen_text(app)
        assert "│it      0.009490   0.9620 0.009490 0.009490 0.009490        0│" in text
        assert "? help" in text.splitlines()[-1]
        exp = app.screen.query_one("#in0", MatrixView)   # cut: and it says so, which way and how much
        assert not whole(exp) and "more ▸" in str(exp.border_subtitle)
        assert "h0.weights[query the, key the] = 1 ÷ 1 = 1" in text   # the cell's story stays in sight


@pilot_test
async def test_every_step_of_small_scenarios_is_whole_at_80_by_24():
    async with opened("by_hand", size=(80, 24)) as (app, pilot):
        for name in ["by_hand", "gpt_causal", "multi_head", "bank_river", "sliding_window"]:
            app.screen.open_scenario(name)
            await settle(pilot)
            trace = app.screen.trace
            for step in [s for s in trace.steps if s.head in (None, 0)]:
                await go_to(pilot, step.id)
                current = app.screen.query_one("#current", MatrixView)
                if current.natural().width <= app.screen.query_one("#work").size.width:
                    assert whole(current), (name, step.id)
                for view in app.screen.query("#inputs MatrixView").results(MatrixView):
                    if view.display and not whole(view):   # a cut source says so on its border
                        assert "more" in str(view.border_subtitle), (name, step.id, view.border_title)


@pilot_test
async def test_at_140_by_45_a_small_step_leaves_no_hole():
    async with opened("by_hand", size=(140, 45)) as (app, pilot):
        await go_to(pilot, "h0.q")
        current = app.screen.query_one("#current", MatrixView)
        assert whole(current) and current.outer_size.width <= current.natural().width + 1
        sources = [v for v in app.screen.query("#inputs MatrixView").results(MatrixView) if v.display]
        assert len(sources) == 2 and all(whole(v) for v in sources)
        bottom = max(v.region.bottom for v in [current, *sources])
        assert app.screen.query_one("#info").region.y - bottom <= 1   # the words follow the matrices


@pilot_test
async def test_a_resize_lays_the_panels_out_again():
    async with opened("gpt_causal", size=(140, 45)) as (app, pilot):
        await go_to(pilot, "h0.weights")
        await pilot.resize_terminal(80, 24)
        await settle(pilot)
        assert whole(app.screen.query_one("#current", MatrixView))
        await pilot.resize_terminal(140, 45)
        await settle(pilot)
        assert all(whole(v) for v in app.screen.query(MatrixView).results(MatrixView) if v.display)


@pilot_test
async def test_the_diff_view_shows_a_small_step_whole_at_100_by_30():
    """A, B and A − B of by_hand's weights: all whole (in a row, or A and B above A − B), no cut sign."""
    from tui.screens.diff import DiffScreen
    async with opened(size=(100, 30)) as (app, pilot):
        await go_to(pilot, "h0.weights")
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, DiffScreen)
        for view in app.screen.query("#sides MatrixView").results(MatrixView):
            want = view.natural()
            assert view.size.width + 0 >= want.width - 2 and view.size.height >= want.height - 2, view.id


@pilot_test
async def test_the_key_bar_is_built_again_only_when_what_it_shows_changes():
    """Textual rebuilds a footer at every change of focus; the key bar keeps its keys while they stay
    what they were (a step on, the focus moved), and shows the keys that fit when the width changes."""
    from textual.widgets._footer import FooterKey

    from tui.widgets.fit import KeyBar
    async with opened("by_hand", size=(200, 40)) as (app, pilot):
        bar = app.screen.query_one(KeyBar)
        keys = list(bar.query(FooterKey))
        assert "? help" in screen_text(app).splitlines()[-1]
        await pilot.press("n")
        app.screen.focus_next()
        await settle(pilot)
        assert app.screen.focused is not None and list(bar.query(FooterKey)) == keys
        await pilot.resize_terminal(80, 24)
        await settle(pilot)
        # the bar is built again a refresh after its resize
        assert await until(pilot, lambda: 0 < len(bar.query(FooterKey)) < len(keys))
        assert not set(bar.query(FooterKey)) & set(keys)
        assert await until(pilot, lambda: "M model" not in screen_text(app).splitlines()[-1])
        assert "? help" in screen_text(app).splitlines()[-1]


@pilot_test
async def test_a_panel_is_ready_for_its_size_before_the_layout_gives_it(monkeypatch):
    """Every step of gpt_causal at 80 × 24, by `n`: each panel's scrollbars, title and count of what
    lies out of sight are settled for the size the layout will give it, so the resize changes none of
    them (each change would draw the panel again, a scrollbar come or gone lay the screen out again),
    and what was settled is what the resized panel needs: a scrollbar exactly where it can scroll."""
    after_resize = []
    on_resize, border = MatrixView.on_resize, MatrixView._border

    def resized(self):
        self._resizing = True
        try:
            on_resize(self)
        finally:
            self._resizing = False

    def watched(self, name, text):
        if getattr(self, "_resizing", False) and self._borders.get(name) != text:
            after_resize.append((self.id, name, text))
        border(self, name, text)
    monkeypatch.setattr(MatrixView, "on_resize", resized)
    monkeypatch.setattr(MatrixView, "_border", watched)
    async with opened("gpt_causal", size=(80, 24)) as (app, pilot):
        trace = app.screen.trace
        ids = [s.id for s in trace.steps if s.head in (None, 0)]
        after_resize.clear()   # the first layout, when the app opened: no size was known before it
        for step_id in ids[1:]:
            await pilot.press("n")
            await settle(pilot)
            assert app.screen.step_id == step_id
            for view in app.screen.query(MatrixView).results(MatrixView):
                if view.display:
                    assert view.show_horizontal_scrollbar == (view.max_scroll_x > 0), (step_id, view.id)
                    assert view.show_vertical_scrollbar == (view.max_scroll_y > 0), (step_id, view.id)
        assert after_resize == [], after_resize
