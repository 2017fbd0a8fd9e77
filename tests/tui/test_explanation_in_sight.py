"""The cell's explanation is always in sight: for every built-in, at 80 × 24 and 160 × 50, on every
step of the first head (the largest ones at the larger size), the explanation area is on screen
with room for its first lines, and moving the cursor changes what it says."""
import pytest

import tracer
from tui.session import head_steps
from tui.widgets.cell_info import CellInfo

from tui_helpers import go_to, opened, pilot_test, screen_text, settle

HEAVY = {"gpt3_layer": "2.5 GB of weights: too heavy for the suite (the same view code as gpt2_small)"}
BUILTINS = [pytest.param(name, marks=pytest.mark.skip(reason=HEAVY[name])) if name in HEAVY else name
            for name, _ in tracer.list_builtins()]


def story(app) -> str:
    return str(app.screen.query_one(CellInfo).render())


def first_line(app) -> str:
    return story(app).splitlines()[0]


async def explained(app, pilot, step_id: str) -> None:
    """On this step, the explanation is on screen, and a move of the cursor changes it."""
    screen = app.screen
    await go_to(pilot, step_id)
    info = screen.query_one("#info")
    width, height = app.size
    assert info.region.height >= 4 and info.region.bottom <= height - 1, (step_id, info.region, app.size)
    before = story(app)
    assert first_line(app) in screen_text(app), (step_id, before)
    rows, cols = app.screen.trace.step(step_id).shape
    if rows == cols == 1:
        return
    row, col = screen.cell
    await pilot.press("right" if col < cols - 1 else "left" if col else "down" if row < rows - 1 else "up")
    await settle(pilot)
    after = story(app)
    assert after != before and first_line(app) in screen_text(app), (step_id, before, after)


@pytest.mark.parametrize("name", BUILTINS)
@pilot_test
async def test_the_explanation_follows_the_cursor_at_every_size(name):
    async with opened(name, size=(80, 24)) as (app, pilot):
        steps = head_steps(app.screen.trace, 0)
        for step in steps:
            await explained(app, pilot, step.id)
        await pilot.resize_terminal(160, 50)
        await settle(pilot)
        largest = sorted(steps, key=lambda s: s.shape[0] * s.shape[1])[-3:]
        for step in largest:
            await explained(app, pilot, step.id)
