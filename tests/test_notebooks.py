"""Notebooks run in a real kernel (nbclient, ipykernel): the example notebook of the repository,
then a notebook that displays a trace, both in one kernel; the outputs' MIME bundles are what a
front end (JupyterLab, VS Code, Colab) would show."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebooks run with nbclient, nbformat, ipykernel (test extra)")
nbclient = pytest.importorskip("nbclient", reason="the notebooks run with nbclient (test extra)")
pytest.importorskip("ipykernel", reason="the notebooks run in an ipykernel (test extra)")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "attention.ipynb"
DISPLAY = ["import tracer\ntrace = tracer.run('by_hand', arithmetic='by-hand')\ntrace",
           "trace.show('h0.weights')",
           "trace.scenario",
           "tracer.run('gpt_causal').show(figure='lines')"]


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """(the example, the display notebook), executed one after the other in one kernel, which
    finds this checkout's packages first and runs in a folder of its own."""
    from nbformat.v4 import new_code_cell, new_notebook
    example = nbformat.read(EXAMPLE, as_version=4)
    display = new_notebook(cells=[new_code_cell(src) for src in DISPLAY])
    folder = tmp_path_factory.mktemp("kernel")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        mp.setenv("HF_HUB_OFFLINE", "1")
        client = nbclient.NotebookClient(example, timeout=300, kernel_name="python3",
                                         resources={"metadata": {"path": str(folder)}})
        with client.setup_kernel():
            for i, cell in enumerate(example.cells):
                client.execute_cell(cell, i)
            client.nb = display
            for i, cell in enumerate(display.cells):
                client.execute_cell(cell, i)
    return example, display


def _results(nb) -> list[dict]:
    """Each code cell's displayed data (execute_result and display_data merged), in order."""
    out = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            data = {}
            for o in cell.outputs:
                assert o.output_type != "error", "".join(o.get("traceback", []))
                data.update(o.get("data", {}))
            out.append(data)
    return out


def _text(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def test_the_example_is_kept_small_and_stripped():
    nb = nbformat.read(EXAMPLE, as_version=4)
    nbformat.validate(nb)
    assert EXAMPLE.stat().st_size < 20_000
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


def test_the_example_runs_and_shows_the_trace_the_swap_and_a_class(executed):
    example, _ = executed
    results = _results(example)
    trace, explained, weights, sheet, swap, exact, real, made = results
    assert trace["text/plain"].startswith("<Trace by_hand:") and "27/46" in trace["text/html"]
    assert "<script" not in trace["text/html"].lower()
    assert "image/svg+xml" in weights and "image/svg+xml" in sheet
    assert swap["text/plain"].startswith("array(") and "arithmetic exact" in exact["text/plain"]
    assert "text/html" in exact
    text = _text(example)
    assert "= 27/46 ≈ 0.587" in text
    # no GPT-2 in this cache (offline): the cell says so and shows nothing; with one, the layer
    assert ("skipped: no GPT-2 in the Hugging Face cache" in text) != ("text/html" in real)
    assert "s01.toml" in made["text/plain"] and "key.json" in made["text/plain"]


def test_a_displayed_trace_carries_html_svg_and_plain_text(executed):
    _, display = executed
    trace, picture, scenario, lines = _results(display)
    assert set(trace) == {"text/plain", "text/html"}
    assert trace["text/plain"] == "<Trace by_hand: 4 tokens, 1 head, 10 steps, arithmetic by-hand, layout columns>"
    html = trace["text/html"]
    assert html.startswith('<div class="attnsim"') and 'data-step="h0.weights"' in html and ">9/46<" in html
    assert set(picture) == {"text/plain", "image/svg+xml"} and "<svg" in picture["image/svg+xml"]
    assert scenario == {"text/plain": "<Scenario by_hand: 4 tokens, d_model 6, 1 head of d_k 3, mask none>"}
    assert "<svg" in lines["image/svg+xml"]
