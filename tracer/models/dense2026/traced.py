"""A layer of a checkpoint of the dense families of 2026 (CONTRACT §17) as `from_arrays` keywords:
the stream into the layer and what earlier layers' attention read come from the family's own
forward (FORWARDS, float64 NumPy), the layer's weights from its tensors, and each mechanism as a
scenario writes it: scale 1, QK-norm's gains or the weightless "l2" norm (after the rotation where
the family norms after it), the values' norm, K = V, keys and values shared across layers
([shared_kv] with the source layer's input), chunks, the query temperature, proportional rotary and
nanochat's rotation the other way; Mistral 4's latent attention ([mla]) with its queries warmed."""
from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np

from ...errors import ScenarioError
from ...mechanisms.rotary.checkpoint import label, rope_spec
from . import FORWARDS, gemma, llama4, mistral4, pre_norm
from .common import Weights
from .settings import WRAPPERS, rope_params, text_config


STREAM = {"gemma3n_text": "x is what the layer's attention reads: the active one of its AltUp streams as the layer "
                          "predicted it, normed (input_layernorm); residual is not the next stream (AltUp corrects "
                          "them all after the MLP)"}   # what x is, where it is not the residual stream


def handles(data: dict) -> bool:
    """Whether config.json is one of these families' (or a wrapper around one)."""
    kind = data.get("model_type")
    return isinstance(kind, str) and (kind in FORWARDS or kind in WRAPPERS)


def _split(m: np.ndarray, count: int) -> list:
    """d × (count·width) → count matrices d × width (a bias: count vectors)."""
    if m.ndim == 1:
        return list(m.reshape(count, -1))
    return list(np.ascontiguousarray(m.reshape(m.shape[0], count, -1).transpose(1, 0, 2)))


def _rms_in(gain: np.ndarray, eps: float) -> dict:
    return {"kind": "rms", "gain": gain, "bias": np.zeros_like(gain), "eps": eps}


def _rope(params: dict, head_dim: int, default_base: float, style: str = "half") -> dict:
    """The [rope] spec of a layer from its rotary parameters (Gemma 4's proportional ones too)."""
    if params.get("rope_type", params.get("type")) == "proportional":
        return dict(base=float(params.get("rope_theta", default_base)), style="half", offset=0,
                    scaling=dict(type="proportional", fraction=float(params.get("partial_rotary_factor", 1.0)),
                                 factor=float(params.get("factor", 1.0))))
    return {**rope_spec({"rope_parameters": params}, "full_attention", head_dim, default_base), "style": style}


def _gemma(w: Weights, data: dict, records: list, i: int) -> tuple[dict, str]:
    cfg, text = gemma.read(data), text_config(data)
    eps, t, s = cfg["eps"], cfg["types"][i], cfg["source"][i]
    at, own, src = f"layers.{i}.", f"layers.{i}.self_attn.", f"layers.{s}.self_attn."
    g, heads = cfg["groups"][i], cfg["heads"]
    local = text.get("rope_local_base_freq", 1e4) if cfg["three_n"] else None
    params = rope_params(text, t, local) or gemma._gemma4_rope(t)
    out = dict(q=_split(w.linear(own + "q_proj"), heads), k=_split(w.linear(src + "k_proj"), g),
               v="k" if cfg["k_eq_v"][s] else _split(w.linear(src + "v_proj"), g), o=w.linear(own + "o_proj"),
               q_norm=np.tile(w[own + "q_norm.weight"], (heads, 1)), k_norm=np.tile(w[src + "k_norm.weight"], (g, 1)),
               qk_norm_eps=eps, v_norm=True, defaults={"scale": "none"}, residual=dict(norm="none"),
               rope=_rope(params, cfg["head_dim"][i], 1e4 if t == "sliding_attention" else 1e6),
               mask=f"sliding:{cfg['window']}" if t == "sliding_attention" else "causal",
               out_norm=dict(gain=w[at + "post_attention_layernorm.weight"], eps=eps))
    if cfg["three_n"]:   # x: the active AltUp stream as the layer predicted it, normed (what its attention reads)
        out.update(x=records[i].h)
    else:
        out.update(x=records[i].x, norm_in=_rms_in(w[at + "input_layernorm.weight"], eps))
    if s != i:
        out["shared_kv"] = dict(source=f"layer {s}", x=records[s].h)
    words = ("sliding " + str(cfg["window"]) if t == "sliding_attention" else "global") + \
        (", K = V" if cfg["k_eq_v"][s] else "") + (f", KV shared from layer {s}" if s != i else "")
    return out, words


def _llama4(w: Weights, data: dict, records: list, i: int) -> tuple[dict, str]:
    cfg, text = llama4.read(data), text_config(data)
    own = f"layers.{i}.self_attn."
    out = dict(x=records[i].x, norm_in=_rms_in(w[f"layers.{i}.input_layernorm.weight"], cfg["eps"]),
               q=_split(w.linear(own + "q_proj"), cfg["heads"]), k=_split(w.linear(own + "k_proj"), cfg["groups"]),
               v=_split(w.linear(own + "v_proj"), cfg["groups"]), o=w.linear(own + "o_proj"),
               residual=dict(norm="none"), mask="causal", rope=None)
    chunked = cfg["types"][i] == "chunked_attention"
    if chunked:
        out["mask"] = f"chunked:{cfg['chunk']}"
    if cfg["rotates"][i]:
        out["rope"] = _rope(rope_params(text), cfg["head_dim"], 500000.0, "interleaved")
        if cfg["qk_norm"]:
            out.update(q_norm="l2", k_norm="l2", qk_norm_after_rope=True, qk_norm_eps=cfg["eps"])
    elif cfg["tuning"]:   # no positions: the queries warmed by τ(p)
        out["rope"] = dict(dims=0, temperature=dict(scale=cfg["beta"], floor=cfg["floor"], shift=1))
    words = (f"chunked {cfg['chunk']}" if chunked else "full") + \
        (", rotary" if cfg["rotates"][i] else ", no positions" + (", τ" if cfg["tuning"] else ""))
    return out, words


def _pre_norm(w: Weights, data: dict, records: list, i: int) -> tuple[dict, str]:
    cfg = pre_norm.read(data)
    kind, eps, t = cfg["kind"], cfg["eps"], cfg["types"][i]
    at, own = f"layers.{i}.", f"layers.{i}.self_attn."
    h, g = cfg["heads"], cfg["groups"]
    out = dict(x=records[i].x, residual=dict(norm="none"), o=w.linear(own + "o_proj"),
               mask=f"sliding:{cfg['window']}" if t == "sliding_attention" else "causal")
    for name, count in (("q", h), ("k", g), ("v", g)):
        out[name] = _split(w.linear(own + f"{name}_proj"), count)
        bias = w.get(own + f"{name}_proj.bias")
        out["b" + name] = None if bias is None else _split(bias, count)
    out["bo"] = w.get(own + "o_proj.bias")
    rope = _rope(rope_params(pre_norm.rope_data(data), t, pre_norm.THETA[kind] if kind == "olmo3" else None),
                 cfg["head_dim"], pre_norm.THETA[kind])
    out["rope"] = {**rope, "sign": -1} if kind == "nanochat" else rope   # nanochat turns the other way
    if kind == "olmo3":   # OLMo 2's norms: none before the attention, one after it
        out["out_norm"] = dict(gain=w[at + "post_attention_layernorm.weight"], eps=eps)
    else:
        gain = np.ones(records[i].x.shape[1]) if kind == "nanochat" else w[at + "input_layernorm.weight"]
        out["norm_in"] = _rms_in(gain, eps)
    if cfg["qk_norm"] == "head":
        out.update(q_norm=np.tile(w[own + "q_norm.weight"], (h, 1)), k_norm=np.tile(w[own + "k_norm.weight"], (g, 1)))
    elif cfg["qk_norm"] == "all":
        out.update(q_norm=w[own + "q_norm.weight"].reshape(h, -1), k_norm=w[own + "k_norm.weight"].reshape(g, -1),
                   qk_norm_scope="all")
    elif cfg["qk_norm"] == "after":
        out.update(q_norm="l2", k_norm="l2", qk_norm_after_rope=True)
    if cfg["qk_norm"]:
        out["qk_norm_eps"] = eps
    return out, f"sliding {cfg['window']}" if t == "sliding_attention" else "full"


def _mistral4(w: Weights, data: dict, records: list, i: int) -> tuple[dict, str]:
    """DeepSeek-V3's latent attention as [mla] writes it, interleaved yarn rotary, and every query warmed
    by τ(p) = 1 + β·ln(1 + ⌊p/F⌋) (shift 0: Mistral 4's curve, not Llama 4's)."""
    cfg, own = mistral4.read(data), f"layers.{i}.self_attn."
    rank, nope, heads = cfg["rank"], cfg["nope"], cfg["heads"]
    kv_a = w.linear(own + "kv_a_proj_with_mqa")                                  # d × (rank + rope)
    q = _split(w.linear(own + ("q_b_proj" if cfg["q_rank"] else "q_proj")), heads)   # each head: [nope | rope]
    up = _split(w.linear(own + "kv_b_proj"), heads)                                # each head: [k_nope | v]
    mla = dict(down=kv_a[:, :rank], rope_k=kv_a[:, rank:], kv_norm=w[own + "kv_a_layernorm.weight"],
               up_k=[u[:, :nope] for u in up], up_v=[u[:, nope:] for u in up], q=[m[:, :nope] for m in q],
               rope_q=[m[:, nope:] for m in q], norm_eps=cfg["eps"])
    if cfg["q_rank"]:
        mla.update(q_down=w.linear(own + "q_a_proj"), q_norm=w[own + "q_a_layernorm.weight"])
    rope = _latent_rope(data)
    out = dict(x=records[i].x, norm_in=_rms_in(w[f"layers.{i}.input_layernorm.weight"], cfg["eps"]), mla=mla,
               o=w.linear(own + "o_proj"), residual=dict(norm="none"), mask="causal", rope=rope)
    if abs(cfg["scale"] * math.sqrt(nope + cfg["rot"]) - 1) > 1e-12:   # yarn's mscale² on the scores
        out["defaults"] = {"scale": 1 / cfg["scale"]}
    return out, _latent_words(rope)


def _latent_rope(data: dict) -> dict:
    """Mistral 4's [rope]: the rotary key's width, interleaved pairs, yarn, and the query temperature."""
    cfg = mistral4.read(data)
    params = {k: v for k, v in rope_params(text_config(data)).items() if k != "partial_rotary_factor"}
    rope = {**_rope(params, cfg["rot"], 10000.0), "style": "interleaved" if cfg["interleave"] else "half"}
    if cfg["beta"] is not None and cfg["floor"]:   # as transformers' get_llama_4_attn_scale
        rope["temperature"] = dict(scale=cfg["beta"], floor=cfg["floor"], shift=0)
    return rope


def _latent_words(rope: dict) -> str:
    return f"latent, {label(rope)}" + (", τ" if "temperature" in rope else "")


BUILDERS = {"gemma4_text": _gemma, "gemma3n_text": _gemma, "llama4_text": _llama4, "glm4_moe": _pre_norm,
            "olmo3": _pre_norm, "nanochat": _pre_norm, "minimax_m2": _pre_norm, "mistral4": _mistral4}


@contextmanager
def refused():
    """config.json's impossible settings, as the forward finds them (every layer sharing keys and
    values, a sharing layer with no earlier layer of its type, an unknown activation), in one line."""
    try:
        yield
    except ScenarioError:   # already one line naming its field
        raise
    except (ValueError, KeyError) as err:
        field, _, said = str(err.args[0] if err.args else err).partition(": ")
        raise ScenarioError(field, f"{said}; expected a configuration transformers can run") from None


def kinds(data: dict) -> list[str]:
    """Each layer's kind in words (for the model's description and the heads overview)."""
    with refused():
        return _kinds(data)


def _kinds(data: dict) -> list[str]:
    text = text_config(data)
    kind = text["model_type"]
    if kind in ("gemma4_text", "gemma3n_text"):
        cfg = gemma.read(data)
        return [("sliding " + str(cfg["window"]) if t == "sliding_attention" else "global") +
                (f", KV shared from layer {s}" if s != i else "") for i, (t, s) in enumerate(zip(cfg["types"], cfg["source"]))]
    if kind == "llama4_text":
        cfg = llama4.read(data)
        return [f"chunked {cfg['chunk']}" if t == "chunked_attention" else "full, no positions" for t in cfg["types"]]
    if kind == "mistral4":   # every layer alike: latent attention, its rotary, the queries warmed
        return [_latent_words(_latent_rope(data))] * text["num_hidden_layers"]
    if kind in BUILDERS:
        cfg = pre_norm.read(text)
        return [f"sliding {cfg['window']}" if t == "sliding_attention" else "full" for t in cfg["types"]]
    return [""] * text.get("num_hidden_layers", 0)


def supported(data: dict) -> str:
    """The text model's type, refused in one line where it is not traced: another model inside a
    wrapper (Ministral 3 in a mistral3 checkpoint), a latent attention with biases (neither its
    steps nor its forward read them)."""
    text = text_config(data)
    kind = text.get("model_type")
    if kind not in BUILDERS:
        raise ScenarioError("model_type", f"{kind!r} is not traced yet; expected one of {', '.join(BUILDERS)}")
    if kind == "mistral4" and text.get("attention_bias"):
        raise ScenarioError("attention_bias", "expected false for a traced latent attention layer (its projections' "
                            "biases are not steps here), got true")
    return kind


def arrays(tensors, data: dict, ids: list[int], layer) -> tuple[dict, str]:
    """(from_arrays keywords of layer `layer` on the token ids, the layer's kind in words)."""
    kind, count = supported(data), text_config(data).get("num_hidden_layers")
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < count:
        raise ScenarioError("model.layer", f"expected a layer from 0 to {count - 1} (the model has {count}), got {layer!r}")
    with refused():
        records = list(FORWARDS[kind](tensors, data, ids, layer))
        return BUILDERS[kind](Weights(tensors), data, records, layer)
