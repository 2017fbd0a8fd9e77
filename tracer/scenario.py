"""Scenarios: the input, the weights and the mask, read from TOML files or your own arrays.

Everything is checked here, once, with errors that name the file, the field and what was
expected; what comes out is stored in the rows orientation (one row per token) that the
kernels use, whatever the file's layout.
"""
from __future__ import annotations

import difflib
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import ScenarioError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

TOP_KEYS = ("name", "title", "description", "layout", "tokens", "arithmetic", "mask", "x",
            "weights", "residual", "random", "defaults")
WEIGHT_KEYS = ("q", "k", "v", "v_down", "v_up", "o")
MAX_FILE_BYTES = 64 * 2**20
BUILTIN_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")


@dataclass
class Scenario:
    """A checked scenario. Arrays are in the rows orientation: x is n × d_model, w_q is
    heads × d_model × d_k, w_o is (heads·d_v) × d_out, the mask is query × key."""
    name: str
    layout: str
    tokens: list[str]
    x: np.ndarray
    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray | None = None
    w_v_down: np.ndarray | None = None
    w_v_up: np.ndarray | None = None
    w_o: np.ndarray | None = None
    mask: object = "none"                 # "none" | "causal" | bool array (query × key)
    title: str = ""
    description: str = ""
    preset: str = "exact"
    defaults: dict = field(default_factory=dict)
    residual: dict | None = None          # {"norm": "layer" | "none", "eps": float}
    source: str | None = None
    random: dict | None = None

    @property
    def n(self) -> int:
        return self.x.shape[0]

    @property
    def d_model(self) -> int:
        return self.x.shape[1]

    @property
    def heads(self) -> int:
        return self.w_q.shape[0]

    @property
    def d_k(self) -> int:
        return self.w_q.shape[2]

    @property
    def d_v(self) -> int:
        return (self.w_v if self.w_v is not None else self.w_v_up).shape[2]

    @property
    def rank(self) -> int | None:
        return None if self.w_v_down is None else self.w_v_down.shape[2]

    @property
    def d_out(self) -> int:
        return self.w_o.shape[1] if self.w_o is not None else self.heads * self.d_v

    def describe(self) -> dict:
        """What the exports write about the scenario."""
        mask = self.mask if isinstance(self.mask, str) else "explicit"
        out = dict(name=self.name, title=self.title, description=self.description,
                   tokens=list(self.tokens), layout=self.layout, heads=self.heads, n=self.n,
                   d_model=self.d_model, d_k=self.d_k, d_v=self.d_v, d_out=self.d_out, mask=mask,
                   residual=self.residual, source=self.source)
        if self.rank is not None:
            out["rank"] = self.rank
        return out


# ---------------------------------------------------------------- finding and reading files

def scenarios_dir() -> Path:
    """The built-in scenarios: shipped inside the package, or beside it in a source checkout."""
    here = Path(__file__).resolve().parent
    inside = here / "scenarios"
    return inside if inside.is_dir() else here.parent / "scenarios"


def builtin_names() -> list[str]:
    return sorted(p.stem for p in scenarios_dir().glob("*.toml"))


def list_builtins() -> list[tuple[str, str]]:
    """(name, one-line description) for every built-in, without building any of them."""
    out = []
    for name in builtin_names():
        data = _read_toml(scenarios_dir() / f"{name}.toml")
        text = str(data.get("title") or data.get("description") or "").strip()
        out.append((name, text.splitlines()[0] if text else ""))
    return out


def resolve_path(spec: str | os.PathLike) -> Path:
    """A path as given, or a built-in scenario's file; a name never leaves the scenarios folder."""
    text = os.fspath(spec)
    if text.endswith(".toml") or os.sep in text or "/" in text or Path(text).is_file():
        return Path(text)
    if not BUILTIN_NAME.match(text) or text not in builtin_names():
        close = difflib.get_close_matches(text, builtin_names(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ScenarioError("scenario", f"{text!r} is neither a .toml file nor a built-in scenario; "
                            f"expected one of {', '.join(builtin_names())}{hint}")
    return scenarios_dir() / f"{text}.toml"


def _read_toml(path: Path) -> dict:
    where = str(path)
    try:
        if path.is_dir():
            raise ScenarioError("file", "is a directory; expected a .toml scenario file", where)
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ScenarioError("file", f"is larger than {MAX_FILE_BYTES >> 20} MiB; "
                                "use a [random] section for large scenarios", where)
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ScenarioError("file", "does not exist; expected a .toml scenario file", where) from None
    except OSError as err:
        raise ScenarioError("file", f"cannot be read ({err.strerror}); expected a readable .toml file",
                            where) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ScenarioError("file", "is not UTF-8 text; expected a .toml scenario file", where) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError("TOML syntax", f"{err}; expected valid TOML", where) from None


def load_scenario(spec: str | os.PathLike) -> Scenario:
    """A built-in scenario by name (`attnsim list`), or a scenario file by path."""
    path = resolve_path(spec)
    data = _read_toml(path)
    try:
        return build(data, default_name=path.stem, source=str(path))
    except ScenarioError as err:
        raise err.at(str(path)) from None


# ---------------------------------------------------------------- checking values

def _unknown(keys, allowed, where: str):
    for key in keys:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ScenarioError(f"{where}{key}", f"unknown field{hint}; expected one of {', '.join(allowed)}")


def _matrix(value, name: str) -> np.ndarray:
    """A non-empty rectangular matrix of finite numbers, as float64 (or the array's float dtype)."""
    if isinstance(value, np.ndarray):
        if value.ndim != 2 or value.size == 0:
            raise ScenarioError(name, f"expected a non-empty 2-D array, got shape {value.shape}")
        if value.dtype.kind not in "biuf" or value.dtype.kind == "b":
            raise ScenarioError(name, f"expected an array of numbers, got dtype {value.dtype}")
        out = value if value.dtype in (np.float32, np.float64) else value.astype(np.float64)
        if not np.isfinite(out).all():
            r, c = np.argwhere(~np.isfinite(out))[0]
            raise ScenarioError(f"{name}[{r}][{c}]", f"expected a finite number, got {out[r, c]}")
        return out
    if not isinstance(value, (list, tuple)) or not value:
        raise ScenarioError(name, f"expected a matrix (a non-empty list of rows of numbers), got {_kind(value)}")
    width = None
    for r, row in enumerate(value):
        if not isinstance(row, (list, tuple)) or not row:
            raise ScenarioError(f"{name}[{r}]", f"expected a row (a non-empty list of numbers), got {_kind(row)}")
        if width is None:
            width = len(row)
        elif len(row) != width:
            raise ScenarioError(f"{name}[{r}]", f"expected {width} numbers like row 0, got {len(row)} (ragged matrix)")
        for c, cell in enumerate(row):
            if isinstance(cell, bool) or not isinstance(cell, (int, float)):
                raise ScenarioError(f"{name}[{r}][{c}]", f"expected a number, got {_kind(cell)}")
            if not math.isfinite(cell):
                raise ScenarioError(f"{name}[{r}][{c}]", f"expected a finite number, got {cell}")
            if abs(cell) > 1.7e308:
                raise ScenarioError(f"{name}[{r}][{c}]", f"expected a number within float64's range, got {cell}")
    return np.array(value, dtype=np.float64)


def _kind(value) -> str:
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, (int, float)):
        return f"a number ({value})"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, (list, tuple)) and not value:
        return "an empty list"
    return f"a {type(value).__name__}"


def _per_head(value, name: str) -> list[np.ndarray]:
    """One matrix, or a list of matrices (one per head)."""
    if isinstance(value, np.ndarray) and value.ndim == 3:
        return [_matrix(m, f"{name}[{h}]") for h, m in enumerate(value)]
    is_list_of_matrices = (isinstance(value, (list, tuple)) and value
                           and all(isinstance(m, np.ndarray) or (isinstance(m, (list, tuple)) and m
                                   and isinstance(m[0], (list, tuple))) for m in value))
    if is_list_of_matrices:
        return [_matrix(m, f"{name}[{h}]") for h, m in enumerate(value)]
    return [_matrix(value, name)]


class _Shapes:
    """Checks each matrix against the sizes already known, in the words of the file's layout."""

    def __init__(self, layout: str):
        self.layout, self.sizes, self.origin = layout, {}, {}

    def check(self, name: str, m: np.ndarray, rows_dims: tuple[str, str]) -> np.ndarray:
        """m as written in the file; returns it in the rows orientation."""
        file_dims = rows_dims if self.layout == "rows" else rows_dims[::-1]
        for dim, size in zip(file_dims, m.shape):
            if dim in self.sizes and self.sizes[dim] != size:
                want = " × ".join(str(self.sizes.get(d, "?")) for d in file_dims)
                raise ScenarioError(name, f"expected a {want} matrix ({' × '.join(file_dims)}, "
                                    f"{dim} = {self.sizes[dim]} from {self.origin[dim]}), got "
                                    f"{m.shape[0]} × {m.shape[1]}")
        for dim, size in zip(file_dims, m.shape):
            self.sizes.setdefault(dim, size)
            self.origin.setdefault(dim, name)
        return m if self.layout == "rows" else m.T


def _text(data: dict, key: str, default: str) -> str:
    value = data.get(key, default)
    if not isinstance(value, str):
        raise ScenarioError(key, f"expected a string, got {_kind(value)}")
    return value


def _choice(data: dict, key: str, choices: tuple, default: str) -> str:
    value = data.get(key, default)
    if value not in choices:
        raise ScenarioError(key, f"expected {' or '.join(map(repr, choices))}, got {_kind(value)}")
    return value


def build(data: dict, default_name: str = "scenario", source: str | None = None) -> Scenario:
    """A Scenario from the TOML document's dict (or `from_arrays`'s), checked field by field."""
    from . import arithmetic as arith  # the arithmetic keys are checked where they are defined
    from .random_scenario import generate

    if not isinstance(data, dict):
        raise ScenarioError("scenario", f"expected a table of fields, got {_kind(data)}")
    _unknown(data, TOP_KEYS, "")
    layout = _choice(data, "layout", ("rows", "columns"), "rows")
    preset = data.get("arithmetic", "exact")
    if preset not in arith.PRESETS:
        raise ScenarioError("arithmetic", f"expected {' or '.join(map(repr, arith.PRESETS))}, got {_kind(preset)}")
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise ScenarioError("defaults", f"expected a table of arithmetic keys, got {_kind(defaults)}")
    for key, value in defaults.items():
        if key in ("mask", "layout"):
            raise ScenarioError(f"defaults.{key}", "expected an arithmetic key; set the top-level field instead")
        try:
            arith.resolve(preset, {key: value})
        except ScenarioError as err:
            raise ScenarioError(f"defaults.{err.field}", err.expected) from None

    if "random" in data:
        if "x" in data or "weights" in data:
            raise ScenarioError("random", "expected either a [random] section or x and [weights], not both")
        data = {**data, **generate(data["random"], layout)}
    if "x" not in data:
        raise ScenarioError("x", "missing; expected the input matrix (or a [random] section)")
    shapes = _Shapes(layout)
    x = shapes.check("x", _matrix(data["x"], "x"), ("token", "d_model"))

    weights = data.get("weights")
    if not isinstance(weights, dict):
        raise ScenarioError("weights", f"missing or not a table; expected [weights] with q, k and v, got {_kind(weights)}")
    _unknown(weights, WEIGHT_KEYS, "weights.")
    for key in ("q", "k"):
        if key not in weights:
            raise ScenarioError(f"weights.{key}", "missing; expected a matrix or a list of one per head")
    low_rank = "v_down" in weights or "v_up" in weights
    if low_rank and not ("v_down" in weights and "v_up" in weights):
        raise ScenarioError("weights.v_up" if "v_down" in weights else "weights.v_down",
                            "missing; a low-rank value map needs both v_down and v_up")
    if low_rank and "v" in weights:
        raise ScenarioError("weights.v", "expected either v or the low-rank pair v_down and v_up, not both")
    if not low_rank and "v" not in weights:
        raise ScenarioError("weights.v", "missing; expected a matrix or a list of one per head")

    def stack(key: str, dims: tuple[str, str], heads: int | None) -> np.ndarray:
        value = weights[key]
        if isinstance(value, np.ndarray) and value.ndim == 3 and value.dtype in (np.float32, np.float64):
            # one array for all heads (e.g. generated): checked whole, kept without a copy
            if heads is not None and value.shape[0] != heads:
                raise ScenarioError(f"weights.{key}", f"expected {heads} matrices (one per head, as weights.q), got {value.shape[0]}")
            if not np.isfinite(value).all():
                raise ScenarioError(f"weights.{key}", "expected finite numbers only")
            shapes.check(f"weights.{key}", value[0], dims)
            return value if layout == "rows" else value.transpose(0, 2, 1)
        mats = _per_head(value, f"weights.{key}")
        if heads is not None and len(mats) != heads:
            raise ScenarioError(f"weights.{key}", f"expected {heads} matrices (one per head, as weights.q), got {len(mats)}")
        return np.stack([shapes.check(f"weights.{key}" + (f"[{h}]" if len(mats) > 1 else ""), m, dims)
                         for h, m in enumerate(mats)])

    w_q = stack("q", ("d_model", "d_k"), None)
    heads = w_q.shape[0]
    w_k = stack("k", ("d_model", "d_k"), heads)
    w_v = w_v_down = w_v_up = None
    if low_rank:
        w_v_down = stack("v_down", ("d_model", "rank"), heads)
        w_v_up = stack("v_up", ("rank", "d_v"), heads)
    else:
        w_v = stack("v", ("d_model", "d_v"), heads)
    d_v = (w_v if w_v is not None else w_v_up).shape[2]
    w_o = None
    if "o" in weights:
        shapes.sizes["heads·d_v"], shapes.origin["heads·d_v"] = heads * d_v, "weights.v"
        w_o = shapes.check("weights.o", _matrix(weights["o"], "weights.o"), ("heads·d_v", "d_out"))

    n = x.shape[0]
    tokens = data.get("tokens", [f"t{i + 1}" for i in range(n)])
    if not isinstance(tokens, (list, tuple)) or not all(isinstance(t, str) for t in tokens):
        raise ScenarioError("tokens", f"expected a list of {n} strings, got {_kind(tokens)}")
    if len(tokens) != n:
        raise ScenarioError("tokens", f"expected {n} labels (one per token of x), got {len(tokens)}")

    scenario = Scenario(
        name=_text(data, "name", default_name), layout=layout, tokens=list(tokens), x=x,
        w_q=w_q, w_k=w_k, w_v=w_v, w_v_down=w_v_down, w_v_up=w_v_up, w_o=w_o,
        mask=read_mask(data.get("mask", "none"), n, layout),
        title=_text(data, "title", ""), description=_text(data, "description", ""),
        preset=preset, defaults=dict(defaults), residual=_residual(data.get("residual")),
        source=source, random=data.get("random"))
    if scenario.residual is not None and scenario.d_out != scenario.d_model:
        what = "weights.o's d_out" if w_o is not None else "heads·d_v"
        raise ScenarioError("residual", f"expected the attention output to be as wide as x (d_model = "
                            f"{scenario.d_model}) to add it back, but {what} is {scenario.d_out}")
    return scenario


def read_mask(value, n: int, layout: str):
    """"none", "causal", or an n × n 0/1 matrix written like the layout's scores."""
    if isinstance(value, str):
        if value not in ("none", "causal"):
            raise ScenarioError("mask", f"expected \"none\", \"causal\" or an {n} × {n} matrix of 0/1, got {value!r}")
        return value
    if isinstance(value, np.ndarray) and value.dtype == bool:
        value = value.astype(np.int8)
    m = _matrix(value, "mask")
    if m.shape != (n, n):
        axes = "query × key" if layout == "rows" else "key × query"
        raise ScenarioError("mask", f"expected an {n} × {n} matrix ({axes}), got {m.shape[0]} × {m.shape[1]}")
    if not np.isin(m, (0, 1)).all():
        r, c = np.argwhere(~np.isin(m, (0, 1)))[0]
        raise ScenarioError(f"mask[{r}][{c}]", f"expected 0 or 1 (1 = may attend), got {m[r, c]:g}")
    allowed = m.astype(bool)
    return allowed if layout == "rows" else allowed.T.copy()


def _residual(value) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ScenarioError("residual", f"expected a table with norm and eps, got {_kind(value)}")
    _unknown(value, ("norm", "eps"), "residual.")
    norm = value.get("norm", "layer")
    if norm not in ("layer", "none"):
        raise ScenarioError("residual.norm", f"expected \"layer\" or \"none\", got {_kind(norm)}")
    eps = value.get("eps", 1e-5)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (0 < eps < 1):
        raise ScenarioError("residual.eps", f"expected a number between 0 and 1, got {_kind(eps)}")
    return {"norm": norm, "eps": float(eps)}


def from_arrays(x, q, k, v=None, o=None, *, layout: str = "rows", mask="none", tokens=None,
                name: str = "mine", title: str = "", description: str = "", v_down=None, v_up=None,
                residual: dict | None = None, arithmetic: str = "exact") -> Scenario:
    """A scenario from your own matrices (e.g. weights taken from a real model): the same
    layouts, shapes and checks as a scenario file; q, k, v may be one matrix or one per head."""
    data = {"name": name, "title": title, "description": description, "layout": layout, "x": x,
            "mask": mask, "arithmetic": arithmetic,
            "weights": {key: val for key, val in dict(q=q, k=k, v=v, o=o, v_down=v_down, v_up=v_up).items()
                        if val is not None}}
    if tokens is not None:
        data["tokens"] = list(tokens) if isinstance(tokens, (list, tuple)) else tokens
    if residual is not None:
        data["residual"] = residual
    return build(data, default_name=name)
