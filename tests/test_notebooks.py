"""Notebooks run in a real kernel (nbclient, ipykernel): the example notebook of the repository,
then a notebook that displays a trace, both in one kernel; the outputs' MIME bundles are what a
front end (JupyterLab, VS Code, Colab) would show."""
from __future__ import annotations

import os
import re
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


def hub_cache(folder: Path) -> Path:
    """A Hugging Face cache holding a tiny random `gpt2` (6 layers, so that the example's layer 5
    exists; positions enough for its sentence), laid out as the hub's client lays it out, so that
    the example's real-model cell runs offline. With transformers missing, an empty cache."""
    try:
        import tiny_checkpoints as tc
        import transformers
    except ImportError:
        return folder
    snapshot = folder / "models--gpt2" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (folder / "models--gpt2" / "refs").mkdir()
    (folder / "models--gpt2" / "refs" / "main").write_text("0" * 40)
    config = transformers.GPT2Config(n_embd=32, n_head=4, n_layer=6, n_positions=128, vocab_size=300,
                                     bos_token_id=0, eos_token_id=0)   # tokens its tokenizer has
    transformers.GPT2LMHeadModel(config).save_pretrained(snapshot, safe_serialization=True)
    transformers.PreTrainedTokenizerFast(tokenizer_object=tc.tokenizer("gpt2")).save_pretrained(snapshot)
    return folder


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """(the example, the display notebook), executed one after the other in one kernel, which
    finds this checkout's packages first, a Hugging Face cache with a tiny GPT-2 (offline), and
    runs in a folder of its own."""
    from nbformat.v4 import new_code_cell, new_notebook
    example = nbformat.read(EXAMPLE, as_version=4)
    display = new_notebook(cells=[new_code_cell(src) for src in DISPLAY])
    folder = tmp_path_factory.mktemp("kernel")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("HF_HUB_CACHE", str(hub_cache(tmp_path_factory.mktemp("hub"))))
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
    trace, explained, weights, sheet, swap, exact, real, made, graded, checked = results
    assert trace["text/plain"].startswith("<Trace by_hand:") and "27/46" in trace["text/html"]
    assert "<script" not in trace["text/html"].lower()
    assert "image/svg+xml" in weights and "image/svg+xml" in sheet
    assert swap["text/plain"].startswith("array(") and "arithmetic exact" in exact["text/plain"]
    assert "text/html" in exact
    text = _text(example)
    assert "= 27/46 ≈ 0.5870" in text
    try:   # the cache's GPT-2 (a tiny one, see hub_cache), layer 5 on the example's sentence
        import transformers  # noqa: F401
    except ImportError:   # the cell says it skipped, and shows nothing
        assert "skipped: no GPT-2 in the Hugging Face cache" in text and real == {}
    else:
        assert real["text/plain"].startswith("<Trace gpt2_layer5: ") and ", 4 heads, " in real["text/plain"]
        assert "gpt2, layer 5" in real["text/html"] and 'data-step="h0.weights"' in real["text/html"]
    assert "s01.toml" in made["text/plain"] and "key.json" in made["text/plain"]
    assert "likely cause: your scores are not scaled" in text and checked["text/plain"].startswith("<Trace sdpa:")
    marks = re.search(r"^s01 \(s01\.csv\): (\d+) of (\d+) right, 0 wrong, 0 unanswered$", text, re.M)
    assert marks and marks.group(1) == marks.group(2) and "class: 1 sheet marked" in text and graded == {}


def _quiz_saves(text: str) -> list[tuple[str, str]]:
    """(SCENARIO, FILE) of each `attnsim quiz SCENARIO … --save FILE` in a text."""
    return [(scenario, f) for scenario, f in re.findall(r"attnsim quiz ([^\s`]+)[^\n`]*?--save ([^\s`]+)", text)
            if "SCENARIO" not in scenario]   # the synopsis, not a recipe


def test_the_examples_class_recipe_is_the_readmes():
    """A student quizzes their own sheet (sNN.toml of the class) and saves JSON, which class grade
    marks; not the original scenario's quiz in a .csv (another sheet's numbers, refused)."""
    import json
    cells = json.loads(EXAMPLE.read_text(encoding="utf-8"))["cells"]
    notebook = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for text in (notebook, readme[readme.index("## For a teacher's class"):]):
        saves = _quiz_saves(text)
        assert saves and all(re.fullmatch(r"\S*s(NN|\d\d)\.toml", scenario) and re.fullmatch(r"s(NN|\d\d)-quiz\.json", f)
                             for scenario, f in saves), saves
    assert all(f.endswith(".json") for _, f in _quiz_saves(readme))


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
