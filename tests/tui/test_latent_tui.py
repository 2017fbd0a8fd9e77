"""Latent attention in the terminal UI: a score is lit from all four matrices it reads (k_pe too,
in the panels and in the "from the highlighted cells of" line), and the worksheet `w` gives every
matrix a student multiplies by, under its formula's name, with θ heading the frequencies."""
import pytest

from tui.widgets.cell_info import CellInfo
from tui.widgets.matrix import MatrixView
from tui.widgets.worksheet import Worksheet

from tui_helpers import go_to, opened, pilot_test, settle


@pytest.mark.parametrize("sid, sources", [
    ("h0.scores", ["h0.q_nope", "h0.k_nope", "h0.q_pe", "k_pe"]),
    ("h0.absorbed", ["h0.q_latent", "c_kv", "h0.q_pe", "k_pe"])])
@pilot_test
async def test_a_latent_score_lights_every_matrix_it_reads(sid, sources):
    async with opened("mla", size=(160, 50)) as (app, pilot):
        await go_to(pilot, sid)
        await pilot.press("down", "down", "right")   # query sat (row 2), key cat (column 1)
        await settle(pilot)
        assert app.screen.cell == (2, 1)
        story = " ".join(str(app.screen.query_one(CellInfo).render()).split())
        assert "from the highlighted cells of " + ", ".join(sources) in story, story
        shown = {view.full_title.split(" · ")[0]: view for view in app.screen.query(".source").results(MatrixView)
                 if view.display}
        assert set(sources) <= set(shown)
        # k_pe: cat's row (key 1) is lit, both its rotary features
        assert sorted(shown["k_pe"].lit) == [(1, 0), (1, 1)]


@pilot_test
async def test_the_worksheet_gives_every_latent_matrix():
    async with opened("mla", size=(200, 60)) as (app, pilot):
        await pilot.press("w")
        await settle(pilot)
        sheet = app.screen.query_one(Worksheet)
        weights = [view.full_title for view in sheet.query(".ws-weight").results(MatrixView)]
        assert weights == ["W_DKV", "W_KR", "W_UQ (head 0)", "W_QR (head 0)", "W_UK (head 0)", "W_UV (head 0)",
                           "W_UKᵀ (head 0)"]
        freqs = sheet.views["freqs"]
        assert freqs.col_labels == ["θ"]
