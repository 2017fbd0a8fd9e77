"""A model built-in (induction) takes --layer and --text in place of its [model]'s, checked against
transformers; its lesson's claim about layer 1's early rows holds there too."""
import re

import numpy as np
import pytest

import tracer
from tracer.scenario.files import scenarios_dir
from tui.cli import main

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")

FOLDER = scenarios_dir() / "induction"
TEXT = "red bird saw my old cat . red bird saw my"


@pytest.fixture(scope="module")
def attentions():
    model = transformers.GPT2LMHeadModel.from_pretrained(FOLDER, attn_implementation="eager").eval()
    tok = tokenizers.Tokenizer.from_file(str(FOLDER / "tokenizer.json"))

    def per_layer(text: str) -> list[np.ndarray]:
        with torch.no_grad():
            out = model(torch.tensor([tok.encode(text).ids]), output_attentions=True)
        return [a[0].numpy() for a in out.attentions]   # head × query × key
    return per_layer


def one_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("attnsim: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("argv,layer,text", [
    (["--layer", "0"], 0, None), (["--text", TEXT], 1, TEXT), (["--layer", "0", "--text", TEXT], 0, TEXT)])
def test_layer_and_text_replace_the_builtins_own(tmp_path, capsys, attentions, argv, layer, text):
    target = tmp_path / "t.npz"
    assert main(["export", "induction", *argv, "-o", str(target)]) == 0
    capsys.readouterr()
    want = attentions(text or tracer.load_scenario("induction").model["text"])[layer]
    with np.load(target, allow_pickle=False) as got:
        for h in range(want.shape[0]):
            np.testing.assert_allclose(got[f"h{h}.weights"], want[h], atol=1e-5)
    assert main(["show", "induction", *argv, "--step", "h0.weights"]) == 0
    assert f"layer {layer} of 2]" in capsys.readouterr().out.splitlines()[0]


def test_a_layer_the_model_lacks_and_a_scenario_without_a_model_are_one_line(capsys):
    assert main(["show", "induction", "--layer", "5"]) == 2
    assert "--layer: expected a layer from 0 to 1" in one_error(capsys)
    assert main(["show", "by_hand", "--layer", "1"]) == 2
    assert "--layer: expected only with --model PATH or a scenario with a [model] section" in one_error(capsys)
    assert main(["show", "--text", "my cat"]) == 2
    assert "--text: expected only with --model PATH" in one_error(capsys)


def test_the_lesson_says_why_early_rows_rest_on_the_first_token(attentions):
    scenario = tracer.load_scenario("induction")
    text = " ".join(scenario.description.split())
    assert "0.9-1.0" in text and "first token" in text and "must add up to 1" in text
    rows = re.search(r"Rows (\d+)-(\d+) have no earlier copy", text)
    first, last = int(rows.group(1)), int(rows.group(2))
    head = int(re.search(r"so head (\d+) parks", text).group(1))
    words = scenario.model["text"].split()
    assert len(set(words[:last + 1])) == last + 1          # no word of those rows came before
    on_first = attentions(scenario.model["text"])[1][head, first:last + 1, 0]
    assert on_first.min() >= 0.9, on_first
