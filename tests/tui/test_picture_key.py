"""`g` saves the step on screen as a picture (the head's worksheet when the worksheet is shown) and
says where on the status line; the export dialog writes svg and png too."""
import xml.etree.ElementTree as ET

import pytest

import tracer
from tui.screens.export import ExportScreen

from tui_helpers import go_to, opened, pilot_test, settle, status_text

pytest.importorskip("matplotlib", reason="pictures need matplotlib (the test extra installs it)")


def svg_texts(path) -> list[str]:
    return ["".join(t.itertext()) for t in ET.parse(path).iter("{http://www.w3.org/2000/svg}text")]


@pilot_test
async def test_g_saves_the_step_as_a_heatmap_and_says_where(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    async with opened() as (app, pilot):
        await go_to(pilot, "h0.weights")
        await pilot.press("g")
        await settle(pilot)
        saved = tmp_path / "by_hand-h0.weights-by-hand.svg"
        assert saved.is_file() and f"saved heatmap to {saved}" in status_text(app).replace("\n", "")
        texts = svg_texts(saved)
        assert "27/46" in texts and tracer.run("by_hand").step("h0.weights").formula in texts


@pilot_test
async def test_g_on_the_worksheet_saves_the_heads_worksheet(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    async with opened() as (app, pilot):
        await go_to(pilot, "h0.scores")
        await pilot.press("w")
        await settle(pilot)
        await pilot.press("g")
        await settle(pilot)
        saved = tmp_path / "by_hand-h0.worksheet-by-hand.svg"
        assert saved.is_file() and "saved worksheet" in status_text(app)
        trace = tracer.run("by_hand")
        assert {trace.step(s).formula for s in ("h0.q", "h0.scores", "h0.z")} <= set(svg_texts(saved))


@pilot_test
async def test_g_without_a_writable_folder_is_an_error_on_the_status_line(tmp_path, monkeypatch):
    (tmp_path / "by_hand-x-by-hand.svg").mkdir()  # the target is a folder: cannot be written
    monkeypatch.chdir(tmp_path)
    async with opened() as (app, pilot):
        await pilot.press("g")
        await settle(pilot)
        assert "error:" in status_text(app) and "directory" in status_text(app)


@pilot_test
async def test_export_dialog_writes_a_png_picture(tmp_path):
    target = tmp_path / "weights.png"
    async with opened() as (app, pilot):
        await go_to(pilot, "h0.weights")
        await pilot.press("e")
        assert isinstance(app.screen, ExportScreen)
        app.screen.query_one("#format").value = "png"
        app.screen.query_one("#path").value = str(target)
        app.screen.query_one("#only").value = True
        await pilot.press("enter")
        await settle(pilot)
        assert not isinstance(app.screen, ExportScreen)
        assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and target.stat().st_size > 10_000
