"""The TUI as a newcomer meets it: f redraws every panel, a compile notice never outlives its
run, clipped cells are marked, the lesson stays in sight, two heads side by side, the export
writes the format typed, a bad setting is named as such, and a closed scenario's memory is freed."""
import gc
import json
import weakref

import numpy as np

import tracer
from textual.app import App
from textual.widgets import Input

from tui.screens.export import ExportScreen
from tui.widgets.matrix import MatrixView
from tui.widgets.status import StatusBar
from tui.widgets.step_info import StepInfo

from tui_helpers import TWO_HEADS, drawn, go_to, opened, pilot_test, screen_text, settle, status_text


@pilot_test
async def test_f_redraws_the_source_panels_too():
    async with opened() as (app, pilot):
        await go_to(pilot, "h0.weights")
        side = app.screen.query_one("#in1", MatrixView)   # h0.sums: 46/3 …
        assert "46/3" in " ".join(sum(drawn(side), []))
        await pilot.press("f")
        await pilot.pause()
        words = " ".join(sum(drawn(side), []))
        assert "46/3" not in words and "15.33" in words


@pilot_test
async def test_a_compile_notice_after_its_run_does_not_stay(monkeypatch):
    from tui.session import Session
    async with opened() as (app, pilot):
        real = Session.run

        def run_and_compile(self):
            trace = real(self)
            tracer_hook = app.screen  # the notice numba sends while compiling, here just before the run ends
            from tui.messages import Compiling
            tracer_hook.post_message(Compiling("compiling exp_powers for float64"))
            return trace
        monkeypatch.setattr(Session, "run", run_and_compile)
        await pilot.press("a")
        await settle(pilot)
        await pilot.pause(0.2)
        assert "compiling" not in status_text(app)


class OneView(App):
    def compose(self):
        yield MatrixView(cursor=True, id="m")


@pilot_test
async def test_a_cell_cut_by_the_panel_edge_is_marked():
    app = OneView()
    async with app.run_test(size=(40, 8)) as pilot:
        view = app.query_one(MatrixView)
        n = 12
        view.show(np.full((3, n), 0.1305), [f"t{i}" for i in range(3)], [f"t{1010 + i}" for i in range(n)])
        await pilot.pause()
        data_w = view.scrollable_content_region.width - view._label_w
        assert data_w % view.cell_width, "the panel must cut a column for this test"
        for y in range(3):
            words = view.render_line(y).text.split()
            assert words[-1] == "…", words           # not 0.13, not t10
            assert all(w == "…" or w in ("0.1305", "t0", "t1") or w.startswith("t10") and len(w) == 5
                       for w in words), words
    view.styles.width = None


@pilot_test
async def test_the_lesson_is_in_sight_on_every_step():
    async with opened("bank_river") as (app, pilot):
        await go_to(pilot, "h0.weights")
        about = str(app.screen.query_one(StepInfo).render())
        assert "lesson:" in about and "bank" in about.split("lesson:", 1)[1]


@pilot_test
async def test_two_heads_side_by_side(scenario_file):
    path = scenario_file("two.toml", TWO_HEADS)
    async with opened(path) as (app, pilot):
        await go_to(pilot, "h0.weights")
        await pilot.press("c")
        await pilot.pause()
        titles = [v.border_title for v in app.screen.query(MatrixView) if v.display]
        assert any(t.startswith("h1.weights") for t in titles), titles


@pilot_test
async def test_the_export_writes_the_format_of_the_extension_typed(tmp_path):
    target = tmp_path / "sheet.md"
    async with opened() as (app, pilot):
        await pilot.press("e")
        assert isinstance(app.screen, ExportScreen)
        assert app.screen.query_one("#format").value == "json"
        app.screen.query_one("#path", Input).value = str(target)
        await pilot.pause()
        await pilot.press("enter")
        await settle(pilot)
        text = target.read_text(encoding="utf-8")
        assert text.startswith("# ") and "| " in text
        try:
            json.loads(text)
            raise AssertionError("written as JSON")
        except json.JSONDecodeError:
            pass


@pilot_test
async def test_a_bad_setting_is_not_called_a_failed_open():
    async with opened() as (app, pilot):
        app.screen.set_option("softmax_base", 0.5)
        await settle(pilot)
        shown = [n.title for n in app._notifications]
        assert shown and "could not open" not in shown[-1]
        assert "softmax_base" in status_text(app)


@pilot_test
async def test_a_closed_scenario_is_released():
    rng = np.random.default_rng(0)
    big = tracer.from_arrays(x=rng.normal(size=(300, 16)), q=rng.normal(size=(16, 8)),
                             k=rng.normal(size=(16, 8)), v=rng.normal(size=(16, 8)), name="big")
    async with opened(big) as (app, pilot):
        await go_to(pilot, "h0.weights")
        old = weakref.ref(app.screen.trace)
        app.screen.open_scenario("by_hand")
        await settle(pilot)
        assert app.screen.trace.scenario.name == "by_hand"
        gc.collect()
        assert old() is None
        held = sum(v.array.nbytes for v in app.screen.query(MatrixView))
        assert held < 10_000, held   # no panel, shown or hidden, keeps the big scenario's arrays


@pilot_test
async def test_the_top_bar_stays_one_line_at_80_columns():
    async with opened("gpt_causal", size=(80, 24)) as (app, pilot):
        await go_to(pilot, "h0.weights")
        lines = screen_text(app).splitlines()
        assert "scenario gpt_causal" in lines[0] and "step h0.weights" in lines[0]
        assert lines[1].startswith("  x ")   # the pipeline starts right under the bar: it did not wrap
        assert "? help" in lines[-1]
