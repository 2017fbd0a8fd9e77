"""What the TUI's matrices say about themselves: a running max or rescale is not labelled a sum,
and one number has one printing within a matrix (rope's equal diagonals read equal)."""
from tui.widgets.matrix import MatrixView

from tui_helpers import drawn, go_to, opened, pilot_test, settle


@pilot_test
async def test_running_max_and_rescale_are_named_for_what_they_hold():
    async with opened("flash", size=(120, 36)) as (app, pilot):
        view = app.screen.query_one("#current", MatrixView)
        for sid, word in (("h0.blk0.max", "max"), ("h0.blk1.rescale", "rescale"), ("h0.blk0.sums", "Σ")):
            await go_to(pilot, sid)
            assert drawn(view)[0] == [word], sid                # the column's header (Σ before, for all three)
            title = view.border_title     # cut at a word's end (…) where the panel is narrow
            assert title.endswith("query × " + ("sum" if word == "Σ" else word)) or (
                title.endswith("…") and ("sum" not in title or word == "Σ")), title


@pilot_test
async def test_rope_diagonals_read_equal_on_screen():
    async with opened("rope", "exact", size=(120, 36)) as (app, pilot):
        await go_to(pilot, "h0.scores")
        rows = [line[1:] for line in drawn(app.screen.query_one("#current", MatrixView))[1:6]]
        assert len({rows[i][i] for i in range(5)}) == 1, rows   # 2 2 2 2.000 2.000 before


@pilot_test
async def test_each_heads_overview_tile_names_its_axes():
    from tui.screens.heads import HeadsScreen
    from tui.widgets.mini_heat import MiniHeat
    for layout, axes in (("rows", "↓ query · key →"), ("columns", "↓ key · query →")):
        async with opened("multi_head", None, {"layout": layout}, size=(120, 36)) as (app, pilot):
            await pilot.press("m")
            await settle(pilot)
            assert isinstance(app.screen, HeadsScreen)
            tiles = list(app.screen.query(MiniHeat))
            assert tiles and all(t.border_subtitle == axes for t in tiles), [t.border_subtitle for t in tiles]


@pilot_test
async def test_the_help_says_e_writes_pictures_too():
    from tui_helpers import screen_text
    async with opened(size=(110, 70)) as (app, pilot):
        await pilot.press("question_mark")
        await pilot.pause()
        line = next(line for line in screen_text(app).splitlines() if "export the trace" in line)
        assert "svg" in line and "png" in line, line


@pilot_test
async def test_two_long_tokens_cut_alike_stay_apart_in_a_matrix(tmp_path):
    """Names longer than a matrix's room are cut ending in their index (as tables and pictures do),
    so tokens that share their first characters do not read as one token on the axes."""
    import tracer
    text = (tracer.scenario.files.scenarios_dir() / "by_hand.toml").read_text(encoding="utf-8")
    long = ["internationalisation", "internationally", "x3", "x4"]
    path = tmp_path / "long.toml"
    path.write_text(text.replace('tokens = ["x1", "x2", "x3", "x4"]', f"tokens = {long}".replace("'", '"')),
                    encoding="utf-8")
    async with opened(str(path), size=(120, 36)) as (app, pilot):
        await go_to(pilot, "h0.weights")
        lines = drawn(app.screen.query_one("#current", MatrixView))
        rows, cols = [line[0] for line in lines[1:5]], lines[0]
        for names in (rows, cols):
            assert len(set(names)) == 4, names                    # internati… twice before
            assert names[0].endswith("…#0") and names[1].endswith("…#1"), names
            assert names[2:] == ["x3", "x4"], names
