"""Fuzzing: mutated built-in scenario files, generated scenarios and generated arrays go through
load_scenario / from_arrays and run; the only outcomes allowed are a trace or a ScenarioError."""
import json
import math
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import tracer
from tracer.scenario.files import scenarios_dir

# derandomized (the same cases on every machine) and without shrinking, so a failure costs seconds
FUZZ = settings(max_examples=300, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
SEEDS = {p.stem: p.read_bytes() for p in sorted(scenarios_dir().glob("*.toml"))   # GPT-size [random] ones
         if b"[random]" not in p.read_bytes() and b"[model]" not in p.read_bytes()}  # take seconds to draw;
# a [model] one names a checkpoint folder beside it, which a copy elsewhere does not have
SEEDS["small_random"] = b"[random]\nseed = 3\ntokens = 4\nd_model = 6\nheads = 2\nd_k = 3\nd_v = 2\n"
TOKEN = re.compile(rb'"(?:[^"\\\n]|\\.)*"|-?\d[\w.+-]*|[A-Za-z_][\w-]*|\s+|.', re.S)
POOL = [b"[", b"]", b"[[", b"]]", b"{", b"}", b"=", b",", b'"', b"'", b"#", b"\n", b"", b"nan", b"inf", b"-inf",
        b"1e400", b"-0.0", b"1e-320", b"true", b"0", b"1", b"-1", b"2.5", b"9" * 30, b'"x"', b"[]", b"[[]]",
        b'"rows"', b'"columns"', b'"causal"', b'"by-hand"', b"[weights]", b"[random]", b"[defaults]",
        b"[residual]", b"x", b"q", b"mask", b"layout", b"tokens", b"\xff", b"\x00", b"1979-05-27"]


def attempt(load):
    """load() builds a scenario; it and a run of it may only succeed or raise ScenarioError."""
    try:
        scenario = load()
        big = scenario.n * scenario.n * scenario.heads > 200_000
        trace = tracer.run(scenario, lazy=big)  # a large lazy trace computes nothing yet
        if not big:
            assert [s.id for s in trace.steps][0] == "x"
        return True
    except tracer.ScenarioError as err:
        assert str(err) and "\n" not in str(err)
        return False


def load_bytes(tmp_path: Path, raw: bytes):
    path = tmp_path / "fuzzed.toml"
    path.write_bytes(raw)
    return lambda: tracer.load_scenario(path)


@st.composite
def byte_mutations(draw):
    raw = bytearray(SEEDS[draw(st.sampled_from(sorted(SEEDS)))])
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(raw)))
        how = draw(st.sampled_from(["flip", "insert", "delete", "cut"]))
        if how == "flip" and at < len(raw):
            raw[at] = draw(st.integers(0, 255))
        elif how == "insert":
            raw[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif how == "delete":
            del raw[at:at + draw(st.integers(1, 8))]
        elif how == "cut":  # a half-saved file
            del raw[at:]
    return bytes(raw)


@st.composite
def token_mutations(draw):
    tokens = TOKEN.findall(SEEDS[draw(st.sampled_from(sorted(SEEDS)))])
    for _ in range(draw(st.integers(1, 5))):
        i = draw(st.integers(0, len(tokens) - 1))
        how = draw(st.sampled_from(["replace", "delete", "duplicate", "swap"]))
        if how == "replace":
            tokens[i] = draw(st.sampled_from(POOL))
        elif how == "delete":
            tokens[i] = b""
        elif how == "duplicate":
            tokens.insert(i, tokens[i])
        else:
            j = draw(st.integers(0, len(tokens) - 1))
            tokens[i], tokens[j] = tokens[j], tokens[i]
    return b"".join(tokens)


@FUZZ
@given(raw=byte_mutations())
def test_byte_mutated_files(tmp_path, raw):
    attempt(load_bytes(tmp_path, raw))


@FUZZ
@given(raw=token_mutations())
def test_token_mutated_files(tmp_path, raw):
    attempt(load_bytes(tmp_path, raw))


# ------------------------------------------------------------ structure: values, keys, nesting

def to_toml(doc: dict) -> str:
    """A small TOML writer (inline tables and arrays) for the mutated documents."""
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            return "nan" if math.isnan(v) else ("inf" if v == math.inf else "-inf" if v == -math.inf else repr(v))
        if isinstance(v, int):
            return str(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, dict):
            return "{" + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + "}"
        return "[" + ", ".join(value(x) for x in v) + "]"
    return "".join(f"{json.dumps(k)} = {value(v)}\n" for k, v in doc.items())


LEAVES = st.one_of(st.integers(-10**20, 10**20), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                   st.sampled_from(["", "rows", "columns", "causal", "none", "by-hand", "exact", "x", "e"]),
                   st.just([]), st.just([[]]), st.just({}), st.integers(0, 2**40))


def paths(node, here=()):
    """Every place in a parsed document: (path, value)."""
    yield here, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, here + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, here + (i,))


@st.composite
def structural_mutations(draw):
    doc = tomllib.loads(SEEDS[draw(st.sampled_from(sorted(SEEDS)))].decode())
    for _ in range(draw(st.integers(1, 4))):
        places = [p for p, _ in paths(doc) if p]
        if not places:
            break
        where = draw(st.sampled_from(places))
        parent = doc
        for key in where[:-1]:
            parent = parent[key]
        last, old = where[-1], parent[where[-1]]
        how = draw(st.sampled_from(["leaf", "drop", "rename", "wrap", "unwrap", "transpose", "grow"]))
        if how == "leaf":
            parent[last] = draw(LEAVES)
        elif how == "drop":
            del parent[last]
        elif how == "rename" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["X", "weight", "q", "k", "v", "o", "mask", "heads", last + "s"]))] = parent.pop(last)
        elif how == "wrap":
            parent[last] = [old]
        elif how == "unwrap" and isinstance(old, list) and old:
            parent[last] = old[0]
        elif how == "transpose" and isinstance(old, list) and old and all(isinstance(r, list) for r in old):
            try:
                parent[last] = [list(c) for c in zip(*old)]
            except TypeError:
                pass
        elif how == "grow" and isinstance(old, list) and old:
            parent[last] = old + [old[-1]]
    return doc


@FUZZ
@given(doc=structural_mutations())
def test_structurally_mutated_files(tmp_path, doc):
    attempt(load_bytes(tmp_path, to_toml(doc).encode()))
    attempt(lambda: tracer.scenario.build(doc, source="fuzzed"))


# ------------------------------------------------------------ generated scenarios and arrays

@st.composite
def generated_scenarios(draw, layout):
    n, d, dk, dv, heads = (draw(st.integers(1, 4)) for _ in range(5))
    big = st.floats(-1e308, 1e308) | st.sampled_from([0.0, -0.0, 1e-310, 1e300, -1e300, 1.0, 3.0])
    mat = lambda r, c: draw(st.lists(st.lists(big, min_size=c, max_size=c), min_size=r, max_size=r))  # noqa: E731
    shape = (lambda r, c: (r, c)) if layout == "rows" else (lambda r, c: (c, r))
    doc = {"layout": layout, "x": mat(*shape(n, d)),
           "weights": {k: [mat(*shape(d, dk if k != "v" else dv)) for _ in range(heads)] for k in "qkv"},
           "mask": draw(st.sampled_from(["none", "causal", [[draw(st.integers(0, 1)) for _ in range(n)] for _ in range(n)]])),
           "arithmetic": draw(st.sampled_from(["exact", "by-hand"]))}
    overrides = draw(st.dictionaries(st.sampled_from(["scale", "softmax_base", "stable", "dtype", "normalize"]),
                                     st.sampled_from(["sqrt", "floor", "none", "2", "e", "3", "true", "false",
                                                      "float32", "float64", "relu", "softmax", "1e-300", "1e300"]),
                                     max_size=3))
    return doc, overrides


def run_generated(case):
    doc, overrides = case
    try:
        tracer.run(tracer.scenario.build(doc), **overrides)
    except tracer.ScenarioError:
        pass


@FUZZ
@given(case=generated_scenarios("rows"))
def test_generated_scenarios_rows(case):
    run_generated(case)


@FUZZ
@given(case=generated_scenarios("columns"))
def test_generated_scenarios_columns(case):
    run_generated(case)


ARRAY_DTYPES = ["float64", "float32", "float16", "int8", "int64", "uint64", "bool", "complex128", "object",
                "U3", "datetime64[s]"]


@st.composite
def odd_arrays(draw, dims):
    """Mostly the right 2-D shape; sometimes another rank, a zero size, a strange dtype or NaN."""
    ndim = draw(st.sampled_from([2, 2, 2, 0, 1, 3]))
    shape = dims if ndim == 2 else tuple(draw(st.integers(0, 3)) for _ in range(ndim))
    if draw(st.booleans()):
        shape = tuple(max(0, s + draw(st.integers(-1, 1))) for s in shape)
    a = np.asarray(draw(st.lists(st.floats(-1e6, 1e6), min_size=int(np.prod(shape)),
                                 max_size=int(np.prod(shape))))).reshape(shape)
    if a.size and draw(st.integers(0, 5)) == 0:
        a.flat[0] = draw(st.sampled_from([np.nan, np.inf, -np.inf, 1e300]))
    dtype = draw(st.sampled_from(ARRAY_DTYPES))
    with np.errstate(all="ignore"):
        try:
            a = a.astype(dtype)
        except (ValueError, OverflowError):
            pass
    return a if draw(st.integers(0, 4)) else a.tolist()


@FUZZ
@given(data=st.data())
def test_generated_arrays_through_from_arrays(data):
    n, d, dk = (data.draw(st.integers(1, 3)) for _ in range(3))
    x = data.draw(odd_arrays((n, d)))
    q, k, v = (data.draw(odd_arrays((d, dk))) for _ in range(3))
    o = data.draw(st.none() | odd_arrays((dk, 2)))
    mask = data.draw(st.sampled_from(["none", "causal", "diagonal", None]) | odd_arrays((n, n)))
    tokens = data.draw(st.none() | st.lists(st.text(max_size=3) | st.integers(), max_size=4))
    layout = data.draw(st.sampled_from(["rows", "columns", "Rows", 3]))
    attempt(lambda: tracer.from_arrays(x, q, k, v, o, layout=layout, mask=mask, tokens=tokens))


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_every_seed_file_is_itself_valid(tmp_path, name):
    assert attempt(load_bytes(tmp_path, SEEDS[name]))  # else the mutations start from noise


# ------------------------------------------------------------ bombs: small files that cost a lot

@pytest.fixture(autouse=True)
def address_space_limit():
    """Every fuzz case runs under an address-space limit (what the process has mapped + 3 GiB) and
    an alarm, so that a memory bomb fails a test (MemoryError) rather than the machine, and a time
    bomb fails it too; the tracer's own size checks see the limit (tracer/memory.py)."""
    import resource
    import signal

    from tracer import memory
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = memory._mapped() + (3 << 30)
    if soft not in (resource.RLIM_INFINITY, -1):
        limit = min(limit, soft)

    def too_slow(signum, frame):
        raise TimeoutError("a fuzz test ran past its alarm: a time bomb")
    old = signal.signal(signal.SIGALRM, too_slow)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    signal.alarm(900)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


BOMB_BODY = "[weights]\nq = [[1]]\nk = [[1]]\nv = [[1]]\n"


@st.composite
def bombs(draw):
    """Files of at most a few megabytes whose naive cost is gigabytes or minutes."""
    kind = draw(st.sampled_from(["dotted", "header", "keys", "tables", "nested", "inline", "containers",
                                 "tokens", "label", "random", "mask_row"]))
    k = draw(st.integers(1, 6))
    size = {1: 30, 2: 40, 3: 500, 4: 5_000, 5: 60_000, 6: 200_000}[k]
    if kind == "dotted":
        return ("x" + ".a" * size + " = 1\n" + BOMB_BODY).encode()
    if kind == "header":
        return ("x = [[1]]\n[t" + '."b"' * size + "]\nq = 1\n").encode()
    if kind == "keys":
        return "".join(f"k{i} = {i}\n" for i in range(size)).encode() + b"x = [[1]]\n" + BOMB_BODY.encode()
    if kind == "tables":
        return b"x = [[1]]\n" + "".join(f"[[t{i % 3}]]\n" for i in range(size)).encode()
    if kind == "nested":
        return ("x = " + "[" * min(size, 100_000) + "1" + "]" * min(size, 100_000) + "\n").encode()
    if kind == "inline":
        return ("x = " + "{a = " * min(size, 50_000) + "1" + "}" * min(size, 50_000) + "\n").encode()
    if kind == "containers":
        return ("x = [" + "[]," * (size * 10) + "]\n").encode()
    if kind == "tokens":   # a few bytes a token, n × n cells a step
        return ("x = [" + ",".join(["[1]"] * size) + "]\n" + BOMB_BODY).encode()
    if kind == "label":
        return (f'tokens = ["{"w" * size * 10}"]\nx = [[1]]\n' + BOMB_BODY).encode()
    if kind == "mask_row":
        return (f"x = [[1], [1]]\nmask = [[1, 1], [{', '.join(['1'] * size)}]]\n" + BOMB_BODY).encode()
    d = draw(st.sampled_from([1, 4, 64, 4096, 10**6]))
    return f"[random]\nseed = 1\ntokens = {size}\nd_model = {d}\nheads = {k}\nd_k = {d}\n".encode()


@settings(max_examples=60, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(raw=bombs())
def test_bombs_are_refused_or_run_within_the_limits(tmp_path, raw):
    attempt(load_bytes(tmp_path, raw))
