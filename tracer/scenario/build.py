"""Scenarios: the input, the weights and the mask, read from TOML files or your own arrays.

Everything is checked here, once, with errors that name the file, the field and what was
expected; what comes out is stored in the rows orientation (one row per token) that the
kernels use, whatever the file's layout.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import mechanisms
from ..anyarray import numpy_tree
from ..checks import Shapes, choice, kind, labels, matrix, per_head, text, unknown, vectors
from ..errors import ScenarioError, as_text, one_line
from ..mechanisms.compressed import reader as compressed
from ..mechanisms.latent import reader as latent
from ..mechanisms.rotary import reader as rotary
from . import generated as rnd
from . import parts
from .arrays import with_arrays
from .core import Scenario
from .files import read_toml, resolve_path
from ..masks import read_mask

# the layer's own keys, then each mechanism's (tracer/mechanisms, in the registry's order)
TOP_KEYS = ("name", "title", "description", "layout", "tokens", "arithmetic", "mask", "x", "weights", "residual",
            "random", "defaults", "features", "context", "context_tokens", "norm_in", "model", "decode",
            "value_features", *mechanisms.top_keys())
WEIGHT_KEYS = ("q", "k", "v", "v_down", "v_up", "o", "bq", "bk", "bv", "bo", *mechanisms.weight_keys())


def load_scenario(spec, model: dict | None = None) -> Scenario:
    """A built-in scenario by name (`attnsim list`), or a scenario file by path; `model` changes
    keys of its [model] section (text, layer), as `--text` and `--layer` do."""
    path = resolve_path(spec)
    data = read_toml(path)
    if model:
        if not (isinstance(data, dict) and isinstance(data.get("model"), dict)):
            key = next(iter(model))
            raise ScenarioError(f"--{key}", f"expected only with --model PATH or a scenario with a [model] section "
                                f"(such as induction); {path.stem} has none")
        data = {**data, "model": {**data["model"], **model}}
    try:
        if isinstance(data, dict) and "model" in data:  # a layer of a real checkpoint (tracer/models)
            from ..models.layer import origin, section_arrays
            scenario = from_arrays(**section_arrays(data, str(path)))
            m = data["model"]
            scenario.model = origin(m["path"], m["text"], m["layer"], m.get("heads"), path.parent)
            return scenario
        return build(data, default_name=path.stem, source=str(path))
    except ScenarioError as err:
        raise err.at(str(path)) from None


def _defaults(data: dict, preset: str) -> tuple[dict, int]:
    """The file's [defaults] (arithmetic keys, each checked), and the itemsize a run will use."""
    from ..arithmetic import resolve

    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise ScenarioError("defaults", f"expected a table of arithmetic keys, got {kind(defaults)}")
    for key, value in defaults.items():
        if key in ("mask", "layout"):
            raise ScenarioError(f"defaults.{key}", "expected an arithmetic key; set the top-level field instead")
        try:
            resolve(preset, {key: value})
        except ScenarioError as err:
            raise ScenarioError(f"defaults.{err.field}", err.expected) from None
    return dict(defaults), np.dtype(resolve(preset, defaults).dtype).itemsize


def build(data: dict, default_name: str = "scenario", source: str | None = None) -> Scenario:
    """A Scenario from the TOML document's dict (or `from_arrays`'s), checked field by field."""
    from ..arithmetic import PRESETS

    if not isinstance(data, dict):
        raise ScenarioError("scenario", f"expected a table of fields, got {kind(data)}")
    unknown(data, TOP_KEYS)
    layout = choice(data, "layout", ("rows", "columns"), "rows")
    preset = choice(data, "arithmetic", tuple(PRESETS), "exact")
    defaults, itemsize = _defaults(data, preset)
    if "random" in data:
        if "x" in data or "weights" in data:
            raise ScenarioError("random", "expected either a [random] section or x and [weights], not both")
        data = {**data, **rnd.generate(data["random"], layout, itemsize)}
    if "x" not in data:
        raise ScenarioError("x", "missing; expected the input matrix (or a [random] section)")
    files = []
    data = with_arrays(data, Path(source).parent if source else Path.cwd(), files)   # x = "inputs.npy"
    shapes = Shapes(layout)
    x = matrix(data["x"], "x")
    shapes.check("x", x.shape, ("token", "d_model"))
    x = x if layout == "rows" else x.T
    context, context_tokens = parts.context(data, layout, shapes)
    if "mla" in data:   # multi-head latent attention: the heads' matrices come from [mla]
        w = latent.weights(data["mla"], data.get("weights"), shapes, layout)
        data = {**data, "weights": data.get("weights") or {}}
    elif "compressed" in data:   # DeepSeek V4: its projections are [compressed]'s (mechanisms/compressed)
        w = compressed.weights(data["compressed"], x.shape[0])
        data = {**data, "weights": data.get("weights") or {}}
    else:
        w = _weights(data.get("weights"), shapes, layout, context is not None)
    rotated = w["mla"]["rope"] if "mla" in w else w["w_q"].shape[2]   # the features a head turns
    n = x.shape[0]
    name = text(data, "name") if "name" in data else _file_name(default_name)
    if not name.strip(" .") or any(c in name for c in "/\\"):
        raise ScenarioError("name", f"expected a name without / or \\ (it names exported files), got {kind(name)}")
    m = _keys(data, n, context)
    # decoding is causal, and so are an indexer and a linear layer: a [decode], [sparse] or [linear] section
    # alone implies the mask
    mask = read_mask(data.get("mask", "causal" if {"decode", "sparse", "linear"} & set(data) else "none"), n, layout, m)
    scenario = Scenario(
        name=name, layout=layout, tokens=labels(data.get("tokens", [f"t{i + 1}" for i in range(n)]), n),
        x=x, mask=mask,
        title=text(data, "title", ""), description=text(data, "description", "", single_line=False),
        preset=preset, defaults=defaults, residual=parts.residual(data.get("residual")),
        source=source, random=data.get("random"), context=context, context_tokens=context_tokens,
        rope=rotary.rope(data.get("rope", {} if "mla" in w else None), rotated, n, context is not None), norm_in=parts.norm_in(data.get("norm_in"), x.shape[1]),
        features=labels(data["features"], x.shape[1], "features") if "features" in data else None,
        decode=parts.decode(data.get("decode"), n, mask, context is not None), files=tuple(files), **w)
    if "value_features" in data:   # named once d_v is known: what each column of v and z holds
        scenario.value_features = labels(data["value_features"], scenario.d_v, "value_features")
    latent.refuse_beside(scenario, data)
    _mechanisms(scenario, data)
    if scenario.residual is not None and scenario.d_out != scenario.d_model:
        what = "weights.o's d_out" if scenario.w_o is not None else "heads·d_v"
        raise ScenarioError("residual", f"expected the attention output to be as wide as x (d_model = "
                            f"{scenario.d_model}) to add it back, but {what} is {scenario.d_out}")
    if scenario.random is None:  # a [random] section was sized before anything was drawn
        rnd.refuse_if_too_big(rnd.run_bytes(scenario.dims(), itemsize), "x", "a run", scenario.n)
    return scenario


def _keys(data: dict, n: int, context) -> int:
    """How many keys the mask covers: the context's, DeepSeek V4's tokens then entries, or the tokens."""
    if "compressed" in data:
        return n + compressed.sizes(data["compressed"], n)[2]
    return n if context is None else context.shape[0]


def _mechanisms(scenario: Scenario, data: dict) -> None:
    """Each mechanism read by its own module, once the sizes are known; then what the layer's
    [decode] and [defaults] cannot run beside them."""
    from ..arithmetic import resolve
    mechanisms.read(scenario, data)
    mechanisms.refuse_decode(scenario)
    mechanisms.refuse_arithmetic(scenario, resolve(scenario.preset, scenario.defaults).normalize, "defaults.normalize")


def _file_name(stem: str) -> str:
    """A name from the file's: its bytes as text (a non-UTF-8 name's bytes as \\xff), control
    characters escaped, and "scenario" for a file named `..toml` or ` .toml`."""
    stem = one_line(as_text(stem), 120).replace("/", "_").replace("\\", "_")
    return stem if stem.strip(" .") else "scenario"


def _value_map(weights) -> tuple[bool, bool]:
    """(low-rank, values are the keys), with the combinations that make no sense refused."""
    v_is_k = isinstance(weights.get("v"), str)
    if v_is_k and weights["v"] != "k":
        raise ScenarioError("weights.v", "expected a matrix, a list of them, or \"k\" (the values are the keys), "
                            f"got {kind(weights['v'])}")
    low_rank = "v_down" in weights or "v_up" in weights
    if low_rank and not ("v_down" in weights and "v_up" in weights):
        raise ScenarioError("weights.v_up" if "v_down" in weights else "weights.v_down",
                            "missing; a low-rank value map needs both v_down and v_up")
    if low_rank and "v" in weights:
        raise ScenarioError("weights.v", "expected either v or the low-rank pair v_down and v_up, not both")
    if not low_rank and "v" not in weights:
        raise ScenarioError("weights.v", "missing; expected a matrix or a list of one per head")
    return low_rank, v_is_k


def _weights(weights, shapes, layout: str, cross: bool) -> dict:
    """The [weights] table: projections per head (keys and values per group), biases, W_O."""
    if weights is None:
        raise ScenarioError("weights", "missing; expected a [weights] table with q, k and v")
    if not isinstance(weights, dict):
        raise ScenarioError("weights", f"expected a [weights] table with q, k and v, got {kind(weights)}")
    unknown(weights, WEIGHT_KEYS, "weights.")
    for key in ("q", "k"):
        if key not in weights:
            raise ScenarioError(f"weights.{key}", "missing; expected a matrix or a list of one per head")
    low_rank, v_is_k = _value_map(weights)
    source = "d_context" if cross else "d_model"

    def stack(key: str, dims: tuple[str, str], count=None, what="") -> np.ndarray:
        name = f"weights.{key}"
        mats = per_head(weights[key], name)
        if count is not None and not count(len(mats)):
            raise ScenarioError(name, f"expected {what}, got {len(mats)} matrices")
        if isinstance(mats, np.ndarray):  # one array for all heads (e.g. generated): kept without a copy
            shapes.check(name, mats.shape[1:], dims)
            return np.ascontiguousarray(mats) if layout == "rows" else mats.transpose(0, 2, 1)
        for h, m in enumerate(mats):
            shapes.check(name + (f"[{h}]" if len(mats) > 1 else ""), m.shape, dims)
        # C order, as every trace's kernels read them (a checkpoint's matrices arrive transposed)
        return np.ascontiguousarray(np.stack([m if layout == "rows" else m.T for m in mats]))

    w = {"w_q": stack("q", ("d_model", "d_k"))}
    heads = w["w_q"].shape[0]
    w["w_k"] = stack("k", (source, "d_k"), lambda g: heads % g == 0,
                     f"{heads} matrices (one per head, as weights.q) or a number of groups that divides {heads}")
    groups = w["w_k"].shape[0]
    same = (lambda g: g == groups, f"{groups} matrices (one per {'group' if groups < heads else 'head'}, as weights.k)")
    if low_rank:
        w["w_v_down"] = stack("v_down", (source, "rank"), *same)
        w["w_v_up"] = stack("v_up", ("rank", "d_v"), *same)
    elif v_is_k:
        w["w_v"], w["v_is_k"] = w["w_k"], True
    else:
        w["w_v"] = stack("v", (source, "d_v"), *same)
    w.update(_biases(weights, heads, groups, w, v_is_k))
    if "o" in weights:
        d_v = (w["w_v"] if "w_v" in w else w["w_v_up"]).shape[2]
        shapes.sizes["heads·d_v"], shapes.origin["heads·d_v"] = heads * d_v, "weights.v"
        w_o = matrix(weights["o"], "weights.o")
        shapes.check("weights.o", w_o.shape, ("heads·d_v", "d_out"))
        w["w_o"] = np.ascontiguousarray(w_o) if layout == "rows" else w_o.T
        if "bo" in weights:
            w["b_o"] = vectors(weights["bo"], "weights.bo", 1, w["w_o"].shape[1])
    elif "bo" in weights:
        raise ScenarioError("weights.bo", "expected an output projection o for its bias")
    return w


def _biases(weights, heads: int, groups: int, w: dict, v_is_k: bool) -> dict:
    d_k, d_v = w["w_q"].shape[2], (w["w_v"] if "w_v" in w else w["w_v_up"]).shape[2]
    out = {}
    for key, count, width in (("bq", heads, d_k), ("bk", groups, d_k), ("bv", groups, d_v)):
        if key in weights:
            if key == "bv" and v_is_k:
                raise ScenarioError("weights.bv", "expected no bv when v = \"k\" (the values take the keys' bias)")
            out["b_" + key[1]] = vectors(weights[key], f"weights.{key}", count, width)
    if v_is_k and "b_k" in out:
        out["b_v"] = out["b_k"]
    return out


def from_arrays(x, q=None, k=None, v=None, o=None, *, layout: str = "rows", mask=None, tokens=None,
                name: str = "mine", title: str = "", description: str = "", v_down=None, v_up=None,
                residual: dict | None = None, arithmetic: str = "exact", bq=None, bk=None, bv=None, bo=None,
                rope: dict | None = None, context=None, context_tokens=None, norm_in: dict | None = None,
                features=None, decode: int | None = None, value_features=None, q_norm=None, k_norm=None,
                qk_norm_eps: float | None = None, qk_norm_scope: str | None = None, softcap: float | None = None,
                alibi=None, out_norm: dict | None = None, defaults: dict | None = None, sinks=None,
                mla: dict | None = None, score_bias=None, v_norm: bool | None = None,
                sparse: dict | None = None, index_q=None, index_k=None, index_w=None,
                qk_norm_after_rope: bool | None = None, shared_kv: dict | None = None,
                linear: dict | None = None, gate=None, b_gate=None, compressed: dict | None = None) -> Scenario:
    """A scenario from your own matrices (e.g. weights taken from a real model): the same
    layouts, shapes and checks as a scenario file; q may be one matrix or one per head, k and v one
    per head or one per group (grouped-query), v = "k" reuses the keys; biases and QK-norm's gains
    are vectors (one, or one per head); alibi is True or the slopes; sinks one logit per head;
    defaults are arithmetic keys; mla: [mla]'s keys (then q, k and v are None: the heads' matrices
    are mla's); score_bias: an additive mask, one query × key matrix or one per head, −inf hiding a key;
    sparse: [sparse]'s keys (topk, scale) with the indexer's index_q, index_k and index_w.
    Arrays may be NumPy arrays, PyTorch tensors or anything with __array__ or __dlpack__."""
    given = locals()   # the keywords as they were passed (the parameters, nothing else yet)
    data = {"name": name, "title": title, "description": description, "layout": layout, "x": x,
            "arithmetic": arithmetic,
            "weights": {key: val for key, val in dict(q=q, k=k, v=v, o=o, v_down=v_down, v_up=v_up,
                                                      bq=bq, bk=bk, bv=bv, bo=bo).items() if val is not None}}
    optional = dict(tokens=tokens, residual=residual, context=context, context_tokens=context_tokens,
                    norm_in=norm_in, features=features, decode=None if decode is None else {"prompt": decode},
                    mask=mask, value_features=value_features, defaults=defaults)
    data.update({key: val for key, val in optional.items() if val is not None})
    for keyword, place in mechanisms.arguments().items():   # each mechanism's keywords, where its file puts them
        if given[keyword] is not None:
            section, _, key = place.rpartition(".")
            (data[section] if section else data)[key] = given[keyword]
    data = {key: numpy_tree(val, key) for key, val in data.items()}   # tensors as they are given
    return build(data, default_name=name if isinstance(name, str) else "mine")
