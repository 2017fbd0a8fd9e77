"""The hybrid families through the engine (tracer.from_model → tracer.run, CONTRACT §16) against
transformers' eager forward on tiny checkpoints made with it (tests/tiny_hybrid.py): at every layer the
residual stream entering it, the mixer's output (`out`), a linear layer's every head's β, o and z, a
softmax layer's weights (Kimi's latent layers without positions included); `attnsim show --model DIR
--layer L` on a linear layer; a heads list. transformers runs these in float32, so float32's precision is the bar."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
import tiny_hybrid  # noqa: E402
from tiny_hybrid import close  # noqa: E402

import tracer  # noqa: E402
from tui.cli import main  # noqa: E402

TEXT = "the cat sat on the mat again"
FAMILIES = ["qwen3_next", "qwen3_5", "olmo_hybrid", "olmo_hybrid_nope", "kimi_linear", "kimi_linear_q_rank"]
_built: dict = {}
_models: dict = {}   # the transformers model of each family, for from_transformers


@pytest.fixture(scope="module", params=FAMILIES)
def checkpoint(request, tmp_path_factory):
    """(folder, transformers' per-layer record), built once per family."""
    family = request.param
    if family not in _built:
        folder = tmp_path_factory.mktemp(family)
        model = tiny_hybrid.build(family, folder)
        ids = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json")).encode(TEXT).ids
        _built[family] = (folder, tiny_hybrid.run_model(model, list(ids)))
        _models[folder] = model
    return _built[family]


def test_every_layer_traced_equals_transformers(checkpoint):
    folder, ref = checkpoint
    kinds = []
    for layer, want in enumerate(ref):
        sc = tracer.from_model(str(folder), TEXT, layer)
        trace = tracer.run(sc)
        kinds.append(sc.model["kind"])
        close(trace["x"], want["x"])
        close(trace["out"], want["out"])
        for h in range(sc.heads):
            if "o" in want:
                close(trace[f"h{h}.beta"][:, 0], want["beta"][h])
                close(trace[f"h{h}.decay"], want["decay"][h])
                close(trace[f"h{h}.o"], want["o"][h])
                close(trace[f"h{h}.z"], want["z"][h])
                np.testing.assert_allclose(trace[f"h{h}.implicit"] @ trace[f"h{h}.v_conv"], trace[f"h{h}.o"],
                                           atol=1e-10)   # o = A·v: the weights the layer implies
            else:
                close(trace[f"h{h}.weights"], want["weights"][h])
    assert any(k.startswith("linear") for k in kinds)


def test_show_on_a_linear_layer_prints_its_steps(checkpoint, capsys):
    folder, _ = checkpoint
    assert main(["show", "--model", str(folder), "--text", TEXT, "--layer", "0", "--step", "h0.state",
                 "--step", "h0.implicit"]) == 0
    out = capsys.readouterr().out
    assert "h0.state" in out and "S_t = (I − β_t·k_t·k_tᵀ)" in out and "h0.implicit" in out
    # the state's numbers: value heads × d_k × d_v of tiny_hybrid's configs (Kimi: 2 heads of 8 × 8)
    assert f"keeps: the state keeps {128 if 'kimi' in folder.name else 4 * 8 * 6} numbers whatever the length" in out


def test_a_heads_list_keeps_those_heads_of_a_linear_layer(checkpoint):
    folder, ref = checkpoint
    whole = tracer.run(tracer.from_model(str(folder), TEXT, 0))
    kept = tracer.run(tracer.from_model(str(folder), TEXT, 0, heads=[1, 0]))
    assert kept.heads == 2
    for new, old in ((0, 1), (1, 0)):
        np.testing.assert_allclose(kept[f"h{new}.z"], whole[f"h{old}.z"], rtol=1e-12)
        close(kept[f"h{new}.o"], ref[0]["o"][old])


def test_from_transformers_traces_the_model_in_memory_as_its_folder(checkpoint):
    folder, _ = checkpoint
    model = _models[folder]
    tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    for layer in (0, 1):
        mine = tracer.run(tracer.from_transformers(model, tokenizer, TEXT, layer))
        saved = tracer.run(tracer.from_model(str(folder), TEXT, layer))
        assert [s.id for s in mine.steps] == [s.id for s in saved.steps]
        np.testing.assert_allclose(mine["out"], saved["out"], rtol=1e-12, atol=1e-12)
