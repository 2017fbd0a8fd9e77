"""DeepSeek's blocks (latent attention, routed and shared experts) against transformers' eager
forward on tiny float32 checkpoints: the residual entering every layer, each head's weights and
the attention's output; the routers against NumPy written here; config refusals by name."""
from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import tiny_checkpoints as tc  # noqa: E402
from tracer.errors import ScenarioError  # noqa: E402
from tracer.models import deepseek  # noqa: E402
from tracer.models.config import parse, read_config  # noqa: E402
from tracer.models.deepseek_experts import route  # noqa: E402
from tracer.models.ops import norm  # noqa: E402
from tracer.models.layer import _stream  # noqa: E402
from tracer.models.weights import Tensors  # noqa: E402

IDS = [3, 17, 5, 29, 11, 8, 40, 2, 23]
COMMON = dict(vocab_size=128, hidden_size=32, intermediate_size=40, moe_intermediate_size=12, num_hidden_layers=4,
              num_attention_heads=4, num_key_value_heads=4, n_routed_experts=8, n_shared_experts=1,
              num_experts_per_tok=3, kv_lora_rank=6, qk_rope_head_dim=4, qk_nope_head_dim=6, v_head_dim=5,
              first_k_dense_replace=1, max_position_embeddings=64, rms_norm_eps=1e-6)
VARIANTS = {
    "v2": ("DeepseekV2", dict(q_lora_rank=None, topk_method="group_limited_greedy", n_group=4, topk_group=2,
                              routed_scaling_factor=1.5)),
    "v3": ("DeepseekV3", dict(q_lora_rank=10, n_group=4, topk_group=2, routed_scaling_factor=2.5,
                              rope_parameters=dict(rope_type="yarn", factor=4.0, rope_theta=500.0, mscale=0.7,
                                                   mscale_all_dim=1.0, original_max_position_embeddings=4,
                                                   beta_fast=8.0, beta_slow=0.5))),
    "v3_half": ("DeepseekV3", dict(q_lora_rank=10, n_group=2, topk_group=1, rope_interleave=False,
                                   norm_topk_prob=False)),
}


def _build(cls: str, extra: dict, folder, seed: int):
    torch.manual_seed(seed)
    cfg = getattr(transformers, cls + "Config")(**COMMON, **extra)
    cfg._attn_implementation = "eager"
    model = getattr(transformers, cls + "ForCausalLM")(cfg).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 2:
                p.mul_(6.0 if "embed" not in name else 1.0)
            elif "norm" in name:
                p.copy_(0.5 + torch.rand_like(p))            # gains away from 1
        for name, b in model.named_buffers():
            if "e_score_correction_bias" in name:
                b.copy_(0.3 * torch.randn_like(b))            # the choice must use it
    model.save_pretrained(folder, safe_serialization=True)
    transformers.PreTrainedTokenizerFast(tokenizer_object=tc.tokenizer("llama")).save_pretrained(folder)
    return model


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def built(request, tmp_path_factory):
    cls, extra = VARIANTS[request.param]
    folder = tmp_path_factory.mktemp(request.param)
    model = _build(cls, extra, folder, seed=len(request.param))
    caught = {}
    hooks = [layer.self_attn.register_forward_hook(lambda mod, args, out, i=i: caught.__setitem__(i, out[0]))
             for i, layer in enumerate(model.model.layers)]
    with torch.no_grad():
        out = model(torch.tensor([IDS]), output_hidden_states=True, output_attentions=True)
    for h in hooks:
        h.remove()
    return folder, out, caught


def _close(got, want, what):
    want = np.asarray(want, dtype=np.float64)
    err = np.abs(got - want).max() / max(1.0, np.abs(want).max())
    assert err < 2e-4, f"{what}: relative error {err:.2e}"


def test_every_layer_against_transformers(built):
    folder, out, caught = built
    cfg, tensors = read_config(folder), Tensors(folder)
    for layer in range(cfg.layers):
        x = _stream(tensors, cfg, IDS, layer)
        _close(x, out.hidden_states[layer][0].numpy(), f"x entering layer {layer}")
        w = deepseek.read_attention(tensors, cfg, layer)
        parts = deepseek.latent_parts(norm(x, w["norm_in"]), w, cfg, layer)
        weights = out.attentions[layer][0].numpy()
        assert weights.std() > 0.05, "heads too uniform to prove anything"
        _close(parts["weights"], weights, f"weights of layer {layer}")
        _close(parts["out"], caught[layer][0].numpy(), f"attention output of layer {layer}")


def _route_reference(h, gate, bias, r):
    """Written apart from the module: per token, loops over groups and experts."""
    weights, chosen = [], []
    for row in h:
        logits = gate @ row
        if r["scoring"] == "sigmoid":
            scores = 1 / (1 + np.exp(-logits))
            choice = scores + bias
        else:
            scores = np.exp(logits - logits.max())
            scores = scores / scores.sum()
            choice = scores.copy()
        size = len(scores) // r["n_group"]
        rate = [sorted(choice[g * size:(g + 1) * size])[-2:] for g in range(r["n_group"])]
        rate = [sum(x) if r["scoring"] == "sigmoid" else max(x) for x in rate]
        keep = sorted(range(r["n_group"]), key=lambda g: -rate[g])[: r["topk_group"]]
        allowed = [e for e in range(len(scores)) if e // size in keep]
        top = sorted(allowed, key=lambda e: -choice[e])[: r["top_k"]]
        w = scores[top]
        if r["norm_topk_prob"]:
            w = w / w.sum()
        weights.append(w * r["routed_scaling_factor"])
        chosen.append(top)
    return np.array(weights), np.array(chosen)


@pytest.mark.parametrize("groups", [(1, 1), (4, 2), (3, 1)])
@pytest.mark.parametrize("scoring", ["sigmoid", "softmax"])
@pytest.mark.parametrize("seed", range(4))
def test_router_against_numpy(scoring, seed, groups):
    rng = np.random.default_rng(seed)
    r = dict(scoring=scoring, method="group_limited_greedy", top_k=3, n_group=groups[0], topk_group=groups[1],
             norm_topk_prob=scoring == "sigmoid", routed_scaling_factor=2.5)
    h, gate, bias = rng.normal(size=(7, 5)), rng.normal(size=(12, 5)), rng.normal(size=12) * 0.3
    e, w = route(h @ gate.T, r, bias if scoring == "sigmoid" else None)
    rw, re_ = _route_reference(h, gate, bias if scoring == "sigmoid" else 0.0, r)
    order, rorder = np.argsort(e, axis=1), np.argsort(re_, axis=1)
    assert (np.take_along_axis(e, order, 1) == np.take_along_axis(re_, rorder, 1)).all()
    np.testing.assert_allclose(np.take_along_axis(w, order, 1), np.take_along_axis(rw, rorder, 1), rtol=1e-12)


def _config(**changes):
    data = {"model_type": "deepseek_v3", "hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 2,
            "intermediate_size": 40, "kv_lora_rank": 6, "q_lora_rank": None, "qk_nope_head_dim": 6,
            "qk_rope_head_dim": 4, "v_head_dim": 5, "n_routed_experts": 8, "num_experts_per_tok": 2,
            "moe_intermediate_size": 12, "n_group": 4, "topk_group": 2}
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


@pytest.mark.parametrize("key", ["kv_lora_rank", "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
                                 "qk_rope_head_dim"])
def test_missing_sizes_named(key):
    with pytest.raises(ScenarioError, match=f"^{key}: missing; expected a whole number"):
        parse(_config(**{key: None}))


def test_mscale_in_the_scale():
    """DeepSeek-V3's published rope parameters: factor 40, mscale and mscale_all_dim 1."""
    cfg = parse(_config(rope_scaling=dict(type="yarn", factor=40, mscale=1.0, mscale_all_dim=1.0,
                                          original_max_position_embeddings=4096, beta_fast=32, beta_slow=1)))
    m = 0.1 * math.log(40) + 1
    assert deepseek.scale(cfg) == pytest.approx(m * m / math.sqrt(10), rel=1e-15)


def test_e4m3_against_torch_for_every_code():
    from tracer.models.fp8 import E4M3
    want = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).to(torch.float64).numpy()
    np.testing.assert_array_equal(E4M3, want)   # NaN where torch has NaN (0x7F, 0xFF), every other value exact


FP8_BLOCK = (8, 4)


def _to_fp8(folder, dst, block=FP8_BLOCK, drop_scale: str | None = None, bad_scale: str | None = None):
    """The checkpoint with every attention and MLP matrix stored as DeepSeek-V3 publishes them:
    float8 e4m3 codes and weight_scale_inv per block (amax ÷ 448), config.json saying so. Returns
    the dequantized matrices by name, computed here with torch (the reference)."""
    from safetensors.torch import load_file, save_file
    shutil.copytree(folder, dst)
    tensors, exact = load_file(str(folder / "model.safetensors")), {}
    for name in [n for n in tensors if n.endswith("proj.weight") and ".layers." in n]:
        w = tensors[name].double()
        rows, cols = -(-w.shape[0] // block[0]), -(-w.shape[1] // block[1])
        scale = torch.zeros(rows, cols, dtype=torch.float32)
        for r in range(rows):
            for c in range(cols):
                part = w[r * block[0]:(r + 1) * block[0], c * block[1]:(c + 1) * block[1]]
                scale[r, c] = max(part.abs().max().item(), 1e-12) / 448
        big = scale.double().repeat_interleave(block[0], 0)[: w.shape[0]].repeat_interleave(block[1], 1)[:, : w.shape[1]]
        codes = (w / big).to(torch.float8_e4m3fn)
        exact[name] = codes.double() * big
        tensors[name] = codes
        if name != drop_scale:
            tensors[name + "_scale_inv"] = scale if name != bad_scale else scale[:1]
    save_file(tensors, str(dst / "model.safetensors"))
    data = json.loads((folder / "config.json").read_text())
    data["quantization_config"] = dict(quant_method="fp8", fmt="e4m3", weight_block_size=list(block),
                                       activation_scheme="dynamic")
    (dst / "config.json").write_text(json.dumps(data))
    return exact


def test_fp8_blocks_dequantized_as_read(built, tmp_path):
    """Every layer of an FP8 folder equals transformers' forward with the same dequantized weights."""
    import tracer
    folder, _, _ = built
    exact = _to_fp8(folder, tmp_path / "f")
    from safetensors.torch import load_file, save_file
    shutil.copytree(folder, tmp_path / "deq")   # the same weights, dequantized, for transformers to load
    tensors = {k: v.double() for k, v in load_file(str(folder / "model.safetensors")).items()}
    save_file({**tensors, **exact}, str(tmp_path / "deq" / "model.safetensors"))
    cls = type(transformers.AutoConfig.from_pretrained(folder)).__name__.removesuffix("Config")
    model = getattr(transformers, cls + "ForCausalLM").from_pretrained(tmp_path / "deq", attn_implementation="eager")
    with torch.no_grad():   # (float32: transformers' experts take no float64)
        out = model(torch.tensor([IDS]), output_hidden_states=True, output_attentions=True)
    read = Tensors(tmp_path / "f")
    for name, w in exact.items():   # the dequantization itself: exact, against torch's
        np.testing.assert_array_equal(read[name], w.numpy(), err_msg=name)
    cfg = read_config(tmp_path / "f")
    for layer in (0, cfg.layers - 1):
        _close(_stream(Tensors(tmp_path / "f"), cfg, IDS, layer), out.hidden_states[layer][0].numpy(), f"x of layer {layer}")
        trace, _ = _traced(tmp_path / "f", layer)
        _close(np.stack([trace[f"h{h}.weights"] for h in range(cfg.heads)]), out.attentions[layer][0].numpy(),
               f"weights of layer {layer}")
    assert tracer.from_model(tmp_path / "f", tc.TEXT, 1).heads == cfg.heads


@pytest.mark.parametrize("damage,words", [("drop", ("has dtype F8_E4M3; expected float64",)),
                                          ("bad", ("weight_scale_inv: has shape", "one scale per 8 × 4 block"))])
def test_fp8_without_its_scales_refused_by_tensor(built, tmp_path, capsys, damage, words):
    folder, _, _ = built
    name = "model.layers.0.self_attn.kv_b_proj.weight"
    _to_fp8(folder, tmp_path / "f", **{("drop_scale" if damage == "drop" else "bad_scale"): name})
    _refused(capsys, ["show", "--model", str(tmp_path / "f"), "--text", tc.TEXT, "--layer", "1"], name, *words)


@pytest.mark.parametrize("value", [0.0, -0.5, float("nan")])
def test_fp8_block_scales_that_are_not_positive_are_refused_by_place(built, tmp_path, capsys, value):
    """A block scale multiplies its block: 0 zeroes it, a negative flips it (both were accepted), NaN
    poisons it; each is refused naming the scales' tensor and the block."""
    from safetensors.torch import load_file, save_file
    folder, _, _ = built
    name = "model.layers.0.self_attn.kv_b_proj.weight"
    _to_fp8(folder, tmp_path / "f")
    tensors = load_file(str(tmp_path / "f" / "model.safetensors"))
    tensors[name + "_scale_inv"][1, 0] = value
    save_file(tensors, str(tmp_path / "f" / "model.safetensors"))
    _refused(capsys, ["show", "--model", str(tmp_path / "f"), "--text", tc.TEXT, "--layer", "1"],
             f"{name}_scale_inv: holds {value:g} at [1, 0]; expected ", "the file may be corrupt)")


def _refused(capsys, argv, *words):
    """The CLI: exit 2 and one `attnsim: error:` line holding every word."""
    from tui.cli import main
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("attnsim: error: "), err
    for word in words:
        assert word in err[0], (word, err[0])


def _traced(folder, layer: int, preset: str = "exact"):
    import tracer
    from tracer.models.layer import traced_layer
    cfg = read_config(folder)
    arrays = traced_layer(Tensors(folder), cfg, IDS, [f"t{i}" for i in range(len(IDS))], layer, "tiny", "a test")
    return tracer.run(tracer.from_arrays(**arrays), preset), cfg


def test_traced_latent_layer_against_transformers(built):
    """Every layer traced step by step: each head's weights and the attention's output against
    transformers' eager forward; the latent, the rotary key and each head's parts against the
    block's own NumPy (itself checked above); the absorbed scores equal to the rebuilt ones."""
    folder, out, caught = built
    for layer in range(read_config(folder).layers):
        trace, cfg = _traced(folder, layer)
        x = _stream(Tensors(folder), cfg, IDS, layer)
        w = deepseek.read_attention(Tensors(folder), cfg, layer)
        parts = deepseek.latent_parts(norm(x, w["norm_in"]), w, cfg, layer)
        want = out.attentions[layer][0].numpy()
        for h in range(cfg.heads):
            _close(trace[f"h{h}.weights"], want[h], f"layer {layer} head {h}'s weights")
            for kind in ("q_nope", "q_pe", "k_nope", "v"):
                _close(trace[f"h{h}.{kind}"], parts[kind][h], f"layer {layer} h{h}.{kind}")
            np.testing.assert_allclose(trace[f"h{h}.absorbed"], trace[f"h{h}.scores"], rtol=1e-9, atol=1e-9)
        for kind in ("c_kv", "k_pe") + (("c_q",) if "c_q" in parts else ()):
            _close(trace[kind], parts[kind], f"layer {layer} {kind}")
        _close(trace["out"], caught[layer][0].numpy(), f"layer {layer}'s attention output")
        _close(trace["residual"], x + caught[layer][0].numpy(), f"layer {layer}'s residual")


def test_a_latent_layer_through_the_cli(built, capsys):
    """`attnsim show --model` on a DeepSeek layer: the latent's steps, the cache said in numbers."""
    from tui.cli import main
    folder, _, _ = built
    capsys.readouterr()
    assert main(["show", "--model", str(folder), "--text", tc.TEXT, "--layer", "2", "--explain", "c_kv", "1", "0"]) == 0
    text = capsys.readouterr().out
    m = read_config(folder).mla
    heads, d_v = read_config(folder).heads, m["v"]
    assert f"{m['kv_rank']} + {m['rope']} = {m['kv_rank'] + m['rope']} numbers" in text
    assert f"multi-head attention with {heads} heads of {d_v} would add 2·{heads}·{d_v} = {2 * heads * d_v}" in text


@pytest.mark.parametrize("key", ["kv_lora_rank", "n_routed_experts"])
def test_missing_sizes_refused_by_the_cli(built, capsys, tmp_path, key):
    folder, _, _ = built
    shutil.copytree(folder, tmp_path / "c")
    data = json.loads((folder / "config.json").read_text())
    del data[key]
    (tmp_path / "c" / "config.json").write_text(json.dumps(data))
    _refused(capsys, ["show", "--model", str(tmp_path / "c"), "--text", tc.TEXT, "--layer", "1"],
             f"{key}: missing; expected a whole number")


def test_kimi_k2_reads_as_v3(built, tmp_path):
    """Kimi K2 writes model_type kimi_k2 over DeepSeek-V3's layout (and so routes as V3 does)."""
    folder, out, _ = built
    data = json.loads((folder / "config.json").read_text())
    if data["model_type"] != "deepseek_v3":
        pytest.skip("V3's layout only")
    shutil.copytree(folder, tmp_path / "k")
    (tmp_path / "k" / "config.json").write_text(json.dumps(dict(data, model_type="kimi_k2")))
    cfg = read_config(tmp_path / "k")
    x = _stream(Tensors(tmp_path / "k"), cfg, IDS, cfg.layers - 1)
    _close(x, out.hidden_states[cfg.layers - 1][0].numpy(), "x entering the last layer")


def test_absorbed_scores_on_the_checkpoint(built):
    """W_UK folded into the queries gives each head's no-position scores from c_kv alone."""
    from tracer.mechanisms.latent.compute import absorbed_scores
    folder, _, _ = built
    cfg, tensors = read_config(folder), Tensors(folder)
    x = _stream(tensors, cfg, IDS, 1)
    w = deepseek.read_attention(tensors, cfg, 1)
    parts = deepseek.latent_parts(norm(x, w["norm_in"]), w, cfg, 1)
    m = cfg.mla
    per_head = w["kv_b"].reshape(m["kv_rank"], cfg.heads, m["nope"] + m["v"])
    for h in range(cfg.heads):
        w_uk = per_head[:, h, : m["nope"]]
        want = parts["q_nope"][h] @ parts["k_nope"][h].T
        np.testing.assert_allclose(absorbed_scores(parts["q_nope"][h], w_uk, parts["c_kv"]), want, rtol=1e-9, atol=1e-9)


def test_cache_sizes_against_the_paper():
    """DeepSeek-V2's own sizes: 128 heads of 128, d_c = 4·d_h = 512, d_h^R = d_h/2 = 64."""
    from tracer.mechanisms.latent.compute import cache_per_token
    sizes = cache_per_token(heads=128, head_dim=128, groups=8, kv_rank=512, rope_dims=64)
    assert sizes == {"MHA": 2 * 128 * 128, "GQA": 2 * 8 * 128, "MQA": 2 * 128, "MLA": 576}
    # the paper's table writes MLA as (d_c + d_h^R)·l = (9/2)·d_h·l, the size of GQA with 2.25 groups
    assert sizes["MLA"] == 4.5 * 128 == 2 * 2.25 * 128


def test_experts_read_once_each_and_only_when_chosen():
    """experts.mixture against a dense sum written here; each chosen expert is read once, others never."""
    from tracer.models.experts import mixture
    rng = np.random.default_rng(3)
    h, mats = rng.normal(size=(6, 4)), rng.normal(size=(10, 4, 4))
    chosen = np.array([[1, 7], [7, 2], [1, 2], [9, 1], [2, 7], [1, 9]])
    weights = rng.random(chosen.shape)
    reads = []

    def read(e):
        reads.append(e)
        return {"w": mats[e]}

    got = mixture(h, chosen, weights, lambda e, rows: np.tanh(rows @ read(e)["w"]))
    want = np.array([sum(weights[t, k] * np.tanh(h[t] @ mats[chosen[t, k]]) for k in range(2)) for t in range(6)])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert sorted(reads) == [1, 2, 7, 9]


def test_a_few_heads_of_a_latent_layer(built):
    """[model] heads = [...] on a latent layer: the kept heads' steps are the whole layer's."""
    import tracer
    from tracer.models import keep_heads
    from tracer.models.layer import traced_layer
    folder, _, _ = built
    whole, cfg = _traced(folder, 1)
    arrays = traced_layer(Tensors(folder), cfg, IDS, [f"t{i}" for i in range(len(IDS))], 1, "tiny", "a test")
    part = tracer.run(tracer.from_arrays(**keep_heads(arrays, [3, 1])), "exact")
    for new, old in ((0, 3), (1, 1)):
        for kind in ("k_nope", "v", "scores", "weights", "z"):
            np.testing.assert_allclose(part[f"h{new}.{kind}"], whole[f"h{old}.{kind}"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(part["c_kv"], whole["c_kv"], rtol=1e-12)


def test_a_biased_latent_projection_is_refused_in_one_line(built, tmp_path, capsys):
    folder, _, _ = built
    from safetensors.numpy import load_file, save_file
    shutil.copytree(folder, tmp_path / "b")
    tensors = load_file(str(folder / "model.safetensors"))
    width = tensors["model.layers.1.self_attn.kv_a_proj_with_mqa.weight"].shape[0]
    tensors["model.layers.1.self_attn.kv_a_proj_with_mqa.bias"] = np.zeros(width, np.float32)
    save_file(tensors, str(tmp_path / "b" / "model.safetensors"))
    _refused(capsys, ["show", "--model", str(tmp_path / "b"), "--text", tc.TEXT, "--layer", "1"], "attention_bias",
             "expected false for a traced latent attention layer")
