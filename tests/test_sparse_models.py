"""DeepSeek Sparse Attention checkpoints traced (CONTRACT §18): `deepseek_v32` and `glm_moe_dsa` as
`attnsim show --model` and `from_arrays(**layer_arrays(...))` read them, every layer against
transformers' eager forward of the same tiny float64 checkpoint (tests/tiny_sparse.py): the heads'
weights with exact zeros where the indexer did not choose the key, the attention's output, the
indexer's choice (a GLM-5 shared layer: the choice of the layer before), the words that say so."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import tiny_sparse as ts  # noqa: E402
import tracer  # noqa: E402
from tracer.models import layer_arrays  # noqa: E402
from tracer.models.tokens import encode  # noqa: E402
from tui.cli import main  # noqa: E402

TEXT = "the cat sat on the mat and the dog sat on the log"


@pytest.fixture(scope="module", params=["deepseek_v32", "glm_moe_dsa"])
def checkpoint(request, tmp_path_factory):
    """(family, folder, transformers' layers on TEXT), built once per family."""
    name = request.param
    folder = tmp_path_factory.mktemp(name)
    model = ts.build(name, folder, seed=3)
    ids, _ = encode(folder, TEXT, 64)
    return name, folder, ts.run(model, ids)


def test_every_layer_against_transformers(checkpoint):
    name, folder, theirs = checkpoint
    dropped = 0
    for layer, want in enumerate(theirs):
        trace = tracer.run(tracer.from_arrays(**layer_arrays(folder, TEXT, layer)))
        weights = np.stack([trace.rows(f"h{h}.weights") for h in range(trace.heads)])
        assert want["weights"].std() > 0.05, "heads too uniform to prove anything"
        ts.close(weights, want["weights"], f"{name} layer {layer}: weights")
        ts.close(trace.rows("out"), want["out"], f"{name} layer {layer}: out")
        ts.close(trace.rows("x"), want["x"], f"{name} layer {layer}: x")
        selected = trace.rows("idx.selected") != 0
        seen = np.tri(len(selected), dtype=bool)
        assert ((want["weights"] == 0) == ~selected[None]).all(), f"layer {layer}: zeros elsewhere than transformers'"
        assert (weights[:, ~selected] == 0).all(), f"layer {layer}: a dropped key with a weight"
        if "chosen" in want:
            assert [set(np.flatnonzero(row)) for row in selected] == \
                [c & set(range(t + 1)) for t, c in enumerate(want["chosen"])], f"layer {layer}: another choice"
        dropped += int((seen & ~selected).sum())
    assert dropped > 0, "the text is too short for the choice to matter"


def test_a_shared_layer_reuses_the_choice_before_it(checkpoint):
    name, folder, _ = checkpoint
    if name != "glm_moe_dsa":
        pytest.skip("only GLM-5's config shares an indexer (indexer_types)")
    first, shared = (tracer.run(tracer.from_arrays(**layer_arrays(folder, TEXT, layer))) for layer in (0, 1))
    np.testing.assert_array_equal(shared.rows("idx.selected"), first.rows("idx.selected"))
    assert [s.id for s in shared.steps if s.id.startswith("idx.")] == ["idx.selected"]
    assert "reuses layer 0's choice" in shared.scenario.description
    i, j = np.argwhere(np.tri(shared.scenario.n, dtype=bool) & (shared.rows("idx.selected") == 0))[0]
    told = shared.explain("h0.masked", i, j)
    assert "= −∞   (layer 0's indexer dropped key " in told
    assert told.endswith(", and this layer reuses its choice; its weight will be exactly 0)")
    assert shared.explain("idx.selected", i, i).endswith("(chosen by layer 0's indexer: this layer has none and "
                                                         "reuses its choice)")


def test_show_model_prints_the_indexer_and_its_reasons(checkpoint, capsys):
    name, folder, _ = checkpoint
    code = main(["show", "--model", str(folder), "--text", TEXT, "--layer", "2", "--step", "idx.scores",
                 "--step", "idx.selected"])
    out = capsys.readouterr().out
    assert code == 0 and "idx.scores  Index scores" in out and "idx.selected  Keys selected" in out
    trace = tracer.run(tracer.from_arrays(**layer_arrays(folder, TEXT, 2)))
    assert "its lightning indexer (8 index heads of 8) keeps each query's top 5 keys" in trace.scenario.description
    assert trace.step("idx.q").formula == f"idx.q = RoPE (first 4 features, {'half' if name == 'deepseek_v32' else 'interleaved'} pairs) of C_Q·W_IQ"
    assert trace.step("idx.q").inputs == ("c_q",)
    assert trace.explain("idx.selected", 9, 9).split("   (")[1].startswith(("kept: index score", "dropped: index score"))
    for sid in ("idx.q", "idx.k", "idx.w", "idx.scores", "idx.selected", "h0.masked", "h0.weights"):
        rows, cols = trace[sid].shape
        assert all(trace.explain(sid, r, c).startswith(sid + "[") for r in range(rows) for c in range(cols))


def test_the_model_view_names_the_indexer_and_sees_its_zeros(checkpoint, capsys):
    """`attnsim model`: each layer's kind says top-k and where the choice comes from; its cache
    counts the indexer's key on a full layer; the heads' matrices are the traced layer's."""
    name, folder, theirs = checkpoint
    assert main(["model", str(folder), "--text", TEXT]) == 0
    out = capsys.readouterr().out
    kinds = [line.split(" · ")[1] for line in out.splitlines() if line.startswith("layer ")]
    shared = "latent, top-k 5 (shared from layer 0)"
    assert kinds == ["latent, top-k 5 (indexer)", shared if name == "glm_moe_dsa" else "latent, top-k 5 (indexer)",
                     "latent, top-k 5 (indexer)"]
    per_token = [line.split(" · ")[3] for line in out.splitlines() if line.startswith("layer ")]
    assert per_token[0].startswith("keeps 18 numbers a token")   # latent 6 + k_pe 4 + the indexer's key 8
    if name == "glm_moe_dsa":
        assert per_token[1].startswith("keeps 10 numbers a token")
    view = tracer.model_view(str(folder), TEXT)
    for row, want in zip(view.layers, theirs):   # 14 tokens: each tile is the whole matrix
        ts.close(np.asarray(row.tiles, dtype=np.float64), want["weights"], f"{name} layer {row.layer}: the view's tiles")


def test_a_model_in_memory_is_traced_the_same(checkpoint):
    """tracer.from_transformers on the model object: the same layer as from its folder."""
    name, folder, theirs = checkpoint
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64, attn_implementation="eager",
                                                              experts_implementation="eager")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    trace = tracer.run(tracer.from_transformers(model, tokenizer, TEXT, layer=2))
    weights = np.stack([trace.rows(f"h{h}.weights") for h in range(trace.heads)])
    ts.close(weights, theirs[2]["weights"], f"{name} layer 2 from memory: weights")
    assert "idx.selected" in trace


def test_a_text_too_long_for_memory_is_refused_in_one_line(checkpoint, monkeypatch, capsys):
    from tracer import memory
    name, folder, _ = checkpoint
    monkeypatch.setattr(memory, "fits", lambda need: False)
    code = main(["show", "--model", str(folder), "--text", TEXT, "--layer", "1"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("attnsim: error: --text: gives 14 tokens; running blocks 0 to 1 on them")
    assert err.count("\n") == 1


def test_an_indexer_tensor_of_the_wrong_shape_is_named(checkpoint, tmp_path, capsys):
    """A checkpoint whose indexer disagrees with config.json: one line naming the tensor."""
    import shutil
    from safetensors.numpy import load_file, save_file
    name, folder, _ = checkpoint
    bad = tmp_path / "bad"
    shutil.copytree(folder, bad)
    tensors = load_file(bad / "model.safetensors")
    key = next(k for k in tensors if k.endswith("layers.0.self_attn.indexer.wq_b.weight"))
    tensors[key] = tensors[key][:-8]
    save_file(tensors, bad / "model.safetensors")
    code = main(["show", "--model", str(bad), "--text", TEXT, "--layer", "1"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert f"{key}: has shape (56, 10); expected (64, 10)" in err, err


def test_the_traced_layer_attention_is_left_to_the_trace(checkpoint, monkeypatch):
    """from_model runs the earlier blocks' attention only: the traced layer's scores, choice and
    heads are the trace's to compute (at 4096 tokens they cost minutes twice over)."""
    from tracer.models import dsa_block
    name, folder, _ = checkpoint
    ran, attend = [], dsa_block.attend
    monkeypatch.setattr(dsa_block, "attend", lambda p, *a: ran.append(p["c_kv"].shape) or attend(p, *a))
    for layer in range(3):
        ran.clear()
        layer_arrays(folder, TEXT, layer)
        assert len(ran) == layer, f"{name} layer {layer}: {len(ran)} blocks' attention run for it"
