"""MiniMax (`model_type` "minimax", CONTRACT §16): its lightning layers (the decay rule) beside softmax
layers, against transformers' eager forward on a tiny float64 checkpoint made with it
(tests/tiny_minimax.py): the residual stream into each layer through our own blocks (the experts,
the α/β residual factors on the normed stream), every layer's mixer output, the softmax layers'
weights; a lightning layer's SiLU'd q, k, v and every head's o given transformers' own mixer input
to 1e-9, and through the engine (tracer.from_model → tracer.run) against the recurrence in NumPy
written here, with α_h = exp(−slope_h) from the slope formula written here."""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
import tiny_minimax  # noqa: E402
from tiny_minimax import close  # noqa: E402

import tracer  # noqa: E402
from tracer.errors import ScenarioError  # noqa: E402
from tracer.models import hybrid_block, hybrid_tensors  # noqa: E402
from tracer.models.config import config_json  # noqa: E402
from tracer.models.hybrid_config import hybrid_of  # noqa: E402
from tracer.models.hybrid_linear import lightning_layer  # noqa: E402
from tracer.models.weights import Tensors  # noqa: E402
from tui.cli import main  # noqa: E402

TEXT = "the cat sat on the mat again"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """(folder, transformers' per-layer record, our config, our tensors, the token ids)."""
    folder = tmp_path_factory.mktemp("minimax")
    model = tiny_minimax.build(folder)
    ids = list(tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json")).encode(TEXT).ids)
    return folder, tiny_minimax.run_model(model, ids), hybrid_of(config_json(folder)), Tensors(folder), ids


def alphas(heads: int, layer: int, layers: int) -> np.ndarray:
    """exp(−slope_h): slope_h = (2^(−8/H))^(h+1)·(1 − layer/(layers − 1) + 1e-5), MiniMax's paper's
    ALiBi-like rates shrunk with depth (the 1e-5 guard in the denominator as transformers writes it)."""
    rate = 2.0 ** (-8.0 / heads * np.arange(1, heads + 1))
    return np.exp(-rate * (1 - layer / (layers - 1 + 1e-5) + 1e-5))


def recurrence(q, k, v, alpha):
    """o_t = S_tᵀ·q_t with S_t = α·S_{t−1} + k_t·v_tᵀ, one head, q not scaled."""
    S, out = np.zeros((q.shape[1], v.shape[1])), []
    for t in range(len(q)):
        S = alpha * S + np.outer(k[t], v[t])
        out.append(S.T @ q[t])
    return np.array(out)


def test_every_block_equals_transformers(checkpoint):
    _, ref, cfg, t, ids = checkpoint
    assert cfg.linear == (True, False, True, False) and all(cfg.sparse) and cfg.factors["mlp_beta_factor"] == 1.1
    x = hybrid_block.embed(t, ids)
    for i, want in enumerate(ref):
        close(x, want["x"])                               # the residual into layer i
        after, parts = hybrid_block.run_block(x, t, cfg, i)
        close(parts["out"], want["out"])                  # the mixer's output
        if cfg.linear[i]:   # on transformers' own input, to float64's precision: SiLU(h·W_QKV) and o
            mine = lightning_layer(want["h"], hybrid_tensors.linear_mixer(t, cfg, i), cfg)
            act = want["act"].reshape(len(ids), cfg.v_heads, 3, cfg.d_k)
            for j, key in enumerate("qkv"):
                np.testing.assert_allclose(mine[key], act[:, :, j].transpose(1, 0, 2), rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(mine["o"].transpose(1, 0, 2).reshape(len(ids), -1), want["o"],
                                       rtol=1e-9, atol=1e-9 * np.abs(want["o"]).max())
        else:
            close(parts["weights"], want["weights"])
        x = after


def test_every_layer_traced_equals_transformers_and_the_recurrence(checkpoint):
    folder, ref, cfg, _, _ = checkpoint
    for layer, want in enumerate(ref):
        sc = tracer.from_model(str(folder), TEXT, layer)
        trace = tracer.run(sc)
        close(trace["x"], want["x"])
        close(trace["out"], want["out"])
        if not cfg.linear[layer]:
            assert sc.model["kind"] == "global, rope"
            close(np.stack([trace[f"h{h}.weights"] for h in range(sc.heads)]), want["weights"])
            continue
        assert sc.model["kind"] == "linear (decay)"
        a = alphas(sc.heads, layer, cfg.layers)
        o = np.concatenate([trace[f"h{h}.o"] for h in range(sc.heads)], axis=1)
        close(o, want["o"])
        for h in range(sc.heads):
            q, k, v = (trace[f"h{h}.{x}_act"] for x in "qkv")
            np.testing.assert_allclose(q, 0.5 * trace[f"h{h}.q"] * (1 + np.tanh(trace[f"h{h}.q"] / 2)), rtol=1e-12)
            np.testing.assert_allclose(trace[f"h{h}.decay"][:, 0], a[h], rtol=1e-12)
            np.testing.assert_allclose(trace[f"h{h}.o"], recurrence(q, k, v, a[h]), rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(trace[f"h{h}.implicit"] @ v, trace[f"h{h}.o"], rtol=1e-9, atol=1e-12)
        # z: one RMS norm over all heads' o at a token, times the gain and σ(x·W_Z); out = z·W_O
        rms = np.sqrt((o * o).mean(axis=1, keepdims=True) + 1e-6)
        z = np.concatenate([trace[f"h{h}.z"] for h in range(sc.heads)], axis=1)
        w = hybrid_tensors.linear_mixer(Tensors(folder), cfg, layer)
        gate = 1 / (1 + np.exp(-trace["norm_in"] @ w["z"]))
        np.testing.assert_allclose(z, o / rms * w["norm"] * gate, rtol=1e-9, atol=1e-12)


def test_show_prints_a_lightning_layer(checkpoint, capsys):
    folder = checkpoint[0]
    assert main(["show", "--model", str(folder), "--text", TEXT, "--layer", "2", "--step", "h1.state",
                 "--step", "h1.z"]) == 0
    out = capsys.readouterr().out
    assert "h1.state" in out and "S_t = α_t·S_{t−1} + k_t·v_tᵀ" in out, out
    assert "RMS(O of every head" in out
    assert "keeps: the state keeps 256 numbers whatever the length" in out   # 4 heads of 8 × 8


def test_a_state_cell_and_a_z_cell_are_explained(checkpoint):
    folder = checkpoint[0]
    trace = tracer.run(tracer.from_model(str(folder), TEXT, 0))
    told = trace.explain("h1.z", 3, 2)
    assert "RMS(every head's o)" in told and "all 4 heads" in told, told
    assert "SiLU(" in trace.explain("h0.k_act", 2, 1)
    assert "α" in trace.explain("h2.state", 9, 1)


@pytest.mark.parametrize("key, value, message", [
    ("mlp_alpha_factor", "x", "mlp_alpha_factor: expected a finite number, got a string"),
    ("sliding_window", 4, "sliding_window: expected null"),
])
def test_bad_configs_are_refused_by_key(checkpoint, key, value, message):
    data = dict(json.loads((checkpoint[0] / "config.json").read_text()), **{key: value})
    with pytest.raises(ScenarioError, match=message):
        hybrid_of(data)


def test_a_bad_layer_is_one_line_and_exit_2(checkpoint, capsys):
    assert main(["show", "--model", str(checkpoint[0]), "--text", TEXT, "--layer", "4"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("attnsim: error:") and "layer" in err and "\n" not in err


def test_the_model_view_names_each_kind_and_shows_the_implicit_weights(checkpoint, capsys):
    """`attnsim model`: the lightning layers keep a state of heads·d·d numbers; their matrices are
    the implicit weights, found here by feeding one-hot values through the recurrence on the
    trace's own SiLU'd q and k."""
    from tracer.model_view.hybrid import layers
    folder, _, cfg, t, ids = checkpoint
    assert main(["model", str(folder), "--text", TEXT]) == 0
    out = capsys.readouterr().out
    assert "layer 0 · linear (decay) · heads 4 q / 4 kv · keeps a state of 256 numbers" in out, out
    assert "layer 1 · global, rope · heads 4 q / 2 kv · keeps 32 numbers a token" in out
    trace = tracer.run(tracer.from_model(str(folder), TEXT, 0))
    seen = next(layers(t, cfg, ids))[1]
    a = alphas(4, 0, 4)
    for h in range(4):
        q, k = trace[f"h{h}.q_act"], trace[f"h{h}.k_act"]
        one_hot = np.stack([recurrence(q, k, np.eye(len(ids))[:, [s]], a[h])[:, 0] for s in range(len(ids))], axis=1)
        np.testing.assert_allclose(seen.matrices[h], one_hot, rtol=1e-6, atol=1e-9)


def test_a_model_in_memory_traces_as_its_folder(checkpoint):
    folder = checkpoint[0]
    model = tiny_minimax.build(folder.parent / "again")   # the same seed: the same weights
    tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    for layer in (0, 1, 2):
        mine = tracer.run(tracer.from_transformers(model, tokenizer, TEXT, layer))
        saved = tracer.run(tracer.from_model(str(folder), TEXT, layer))
        assert [s.id for s in mine.steps] == [s.id for s in saved.steps]
        np.testing.assert_allclose(mine["out"], saved["out"], rtol=1e-12, atol=1e-12)


def test_a_heads_list_and_a_decode_are_refused_in_one_line(checkpoint):
    with pytest.raises(ScenarioError, match="model.heads: expected every head of this layer"):
        tracer.from_model(str(checkpoint[0]), TEXT, 0, heads=[1, 0])
    r = np.random.default_rng(0).random
    with pytest.raises(ScenarioError, match=r"decode: expected no \[decode\] beside \[linear\] act"):
        tracer.from_arrays(r((5, 4)), list(r((2, 4, 3))), list(r((2, 4, 3))), list(r((2, 4, 2))), o=r((4, 4)),
                           decode=2, linear=dict(rule="decay", decay=0.9, act="silu"))


def test_every_head_in_another_order_keeps_each_head_s_share_of_the_norm(checkpoint):
    whole = tracer.run(tracer.from_model(str(checkpoint[0]), TEXT, 0))
    kept = tracer.run(tracer.from_model(str(checkpoint[0]), TEXT, 0, heads=[2, 0, 3, 1]))
    for new, old in enumerate([2, 0, 3, 1]):
        np.testing.assert_allclose(kept[f"h{new}.z"], whole[f"h{old}.z"], rtol=1e-12)


def test_a_sliding_window_is_refused_by_the_cli_in_one_line(checkpoint, tmp_path, capsys):
    import shutil
    folder = shutil.copytree(checkpoint[0], tmp_path / "sliding")
    data = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(dict(data, sliding_window=4)))
    assert main(["show", "--model", str(folder), "--text", TEXT, "--layer", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "attnsim: error: sliding_window: expected null: attnsim traces MiniMax's softmax layers over every " \
                  "earlier token", err
