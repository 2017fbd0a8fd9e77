"""ALiBi in the terminal UI: the by-hand weights are fractions in every row (6561/7381, not 0.8889),
and a later key's story says the mask removes it next."""
from fractions import Fraction

from tui.widgets.cell_info import CellInfo
from tui.widgets.matrix import MatrixView

from tui_helpers import drawn, go_to, opened, pilot_test, settle


@pilot_test
async def test_the_weights_are_fractions_and_a_later_key_is_marked():
    async with opened("alibi", size=(140, 40)) as (app, pilot):
        await go_to(pilot, "h0.weights")
        last = drawn(app.screen.query_one("#current", MatrixView))[5]
        powers = [Fraction(3) ** (2 - 2 * (4 - j)) for j in range(5)]   # ⌊4 ÷ 2⌋ − 2·(i − j), i = 4
        assert last == ["la#4", *(str(p / sum(powers)) for p in powers)]
        await go_to(pilot, "h0.biased")
        await pilot.press("right", "right", "right", "right")   # query la#0, key la#4
        await settle(pilot)
        story = " ".join(str(app.screen.query_one(CellInfo).render()).split())
        assert "= 2 + 8 = 10" in story and "the mask removes this key next" in story, story
