"""A pipeline longer than the panel (the online algorithm's blocks) stays navigable: the list shows
the steps around the current one, says how many more there are, and a click still picks a step."""
from tui.widgets.steps import StepList

from tui_helpers import go_to, opened, pilot_test, settle


@pilot_test
async def test_the_current_step_is_always_in_sight():
    async with opened("flash", size=(90, 24)) as (app, pilot):
        steps = [s.id for s in app.screen.trace.steps if s.head in (None, 0)]
        assert len(steps) > 20                       # longer than the panel
        for sid in (steps[-1], steps[len(steps) // 2], steps[0]):
            await go_to(pilot, sid)
            text = str(app.screen.query_one(StepList).render())
            assert f"▶ {sid}" in text
        await go_to(pilot, steps[-1])
        assert "↑" in str(app.screen.query_one(StepList).render())


@pilot_test
async def test_a_step_redraws_only_the_lines_of_the_marker(monkeypatch):
    """`n` moves the marker: the list draws the line it leaves and the line it comes to, not all."""
    drawn = []
    render_line = StepList.render_line
    monkeypatch.setattr(StepList, "render_line", lambda self, y: drawn.append(y) or render_line(self, y))
    async with opened("gpt2_small", size=(120, 40)) as (app, pilot):
        await go_to(pilot, "h0.k")
        drawn.clear()
        await pilot.press("n")
        await settle(pilot)
        listed = app.screen.query_one(StepList)
        lines = [listed._top + listed._lines.index(s) for s in ("h0.k", "h0.v")]   # under the head's two lines
        assert app.screen.step_id == "h0.v" and sorted(drawn) == lines
        text = str(listed.render())
        assert "▶ h0.v" in text and "▶ h0.k" not in text and "  h0.k" in text
