"""Bad input through the Python API: the corpus in bad_inputs/ (one file per mistake, with the
exact message in bad_inputs/expected.toml), plus names, odd files, arrays and arithmetic keys."""
import os
import tomllib
from pathlib import Path

import numpy as np
import pytest

import tracer
from tracer.arithmetic import parse_set, resolve
from tracer.scenario.files import MAX_FILE_BYTES

CORPUS = Path(__file__).parent / "bad_inputs"
EXPECTED = tomllib.loads((CORPUS / "expected.toml").read_text(encoding="utf-8"))
GOOD = "x = [[1, 0, 1], [0, 1, 1]]\n[weights]\nq = [[1, 0], [0, 1], [1, 1]]\nk = [[1, 0], [0, 1], [0, 0]]\nv = [[1], [2], [3]]\n"


def check_message(body: str, want: dict) -> None:
    """body: the message after "<file>: "; want: an `error`, or `contains` (and maybe `field`)."""
    if "error" in want:
        assert body == want["error"]
    else:
        assert all(piece in body for piece in want["contains"]), body
        if "field" in want:
            assert body.startswith(want["field"] + ": "), body
    assert "\n" not in body


def test_every_corpus_file_has_an_expected_error_and_back():
    files = {p.stem for p in CORPUS.iterdir() if p.suffix == ".toml"} - {"expected"}
    assert files == set(EXPECTED)
    assert len(files) >= 60


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file_gives_its_error(name):
    path = str(CORPUS / f"{name}.toml")
    if EXPECTED[name].get("at") == "run":   # a valid file whose numbers cannot be computed: run refuses it
        assert tracer.load_scenario(path).source == path
        return
    with pytest.raises(tracer.ScenarioError) as info:
        tracer.load_scenario(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    check_message(message[len(path) + 2:], EXPECTED[name])
    assert info.value.source == path


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_run_gives_the_same_error_as_load(name):
    path = str(CORPUS / f"{name}.toml")
    with pytest.raises(tracer.ScenarioError) as info:
        tracer.run(path)
    assert str(info.value).startswith(f"{path}: ")
    check_message(str(info.value)[len(path) + 2:], EXPECTED[name])


# ------------------------------------------------------------ names and files that are not scenarios

@pytest.mark.parametrize("spec", ["no_such_scenario", "..", "../by_hand", "a/b", "by_hand/..", "/", "",
                                  " ", "by_hand\x00", "scenarios/../../etc/passwd", "~", "..\\x", "-"])
def test_names_that_are_not_builtins(spec, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(tracer.ScenarioError):
        tracer.load_scenario(spec)


def test_a_name_never_leaves_the_scenarios_folder(tmp_path, monkeypatch):
    # a scenario file one level above the scenarios folder must not be reachable by name
    monkeypatch.chdir(tmp_path)
    from tracer.scenario.files import resolve_path, scenarios_dir
    for name in tracer.builtin_names():
        assert resolve_path(name).resolve().parent == scenarios_dir().resolve()
    for spec in ["../pyproject", "..", "../scenarios/by_hand", "../tracer/__init__"]:
        with pytest.raises(tracer.ScenarioError):
            tracer.load_scenario(spec)


def test_a_builtin_name_wins_over_a_same_named_file_here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "by_hand").write_text("not toml at all [[[")
    assert tracer.load_scenario("by_hand").name == "by_hand"


def test_unknown_name_suggests_the_close_builtin():
    with pytest.raises(tracer.ScenarioError, match='did you mean "by_hand"'):
        tracer.load_scenario("by_hnd")


def test_builtin_name_with_toml_extension_is_hinted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(tracer.ScenarioError, match="the built-in scenario is named 'by_hand', without .toml"):
        tracer.load_scenario("by_hand.toml")


@pytest.mark.parametrize("spec", [None, 3, 2.5, ["by_hand"], {"x": 1}, object()])
def test_a_spec_that_is_not_a_name_or_path(spec):
    with pytest.raises(tracer.ScenarioError, match="^scenario: expected a built-in name or a path"):
        tracer.load_scenario(spec)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(tracer.ScenarioError, match=r"missing\.toml: file: does not exist"):
        tracer.load_scenario(tmp_path / "missing.toml")
    with pytest.raises(tracer.ScenarioError, match=r": file: is a directory; expected a \.toml scenario file$"):
        tracer.load_scenario(tmp_path)
    (tmp_path / "folder.toml").mkdir()
    with pytest.raises(tracer.ScenarioError, match="is a directory"):
        tracer.load_scenario(tmp_path / "folder.toml")
    (tmp_path / "plain").write_text(GOOD)
    with pytest.raises(tracer.ScenarioError, match="does not exist"):  # a file used as a folder
        tracer.load_scenario(tmp_path / "plain" / "x.toml")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    with pytest.raises(tracer.ScenarioError, match="is not a regular file"):
        tracer.load_scenario(fifo)


def test_device_files_are_refused():
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    for dev in ("/dev/zero", "/dev/null"):
        with pytest.raises(tracer.ScenarioError, match="is not a regular file"):
            tracer.load_scenario(dev)


def test_a_huge_file_is_refused_before_reading(tmp_path):
    big = tmp_path / "big.toml"
    with open(big, "wb") as f:  # sparse: takes no disk space
        f.truncate(MAX_FILE_BYTES + 1)
    with pytest.raises(tracer.ScenarioError, match="is larger than 64 MiB"):
        tracer.load_scenario(big)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file(tmp_path):
    path = tmp_path / "secret.toml"
    path.write_text(GOOD)
    path.chmod(0)
    with pytest.raises(tracer.ScenarioError, match="cannot be read"):
        tracer.load_scenario(path)


def test_a_symlink_loop_and_a_link_to_a_device(tmp_path):
    (tmp_path / "a.toml").symlink_to(tmp_path / "b.toml")
    (tmp_path / "b.toml").symlink_to(tmp_path / "a.toml")
    with pytest.raises(tracer.ScenarioError, match=r"a\.toml: file: cannot be read \("):
        tracer.load_scenario(tmp_path / "a.toml")
    if os.path.exists("/dev/zero"):
        (tmp_path / "zero.toml").symlink_to("/dev/zero")
        with pytest.raises(tracer.ScenarioError, match="is not a regular file"):
            tracer.load_scenario(tmp_path / "zero.toml")


def test_random_sizes_beyond_memory_are_refused_before_drawing(monkeypatch):
    from tracer import memory
    from tracer.scenario import generated as rnd
    monkeypatch.setattr(memory, "physical_memory", lambda: 2**30)  # a 1 GiB machine
    monkeypatch.setattr(rnd.np.random, "default_rng", lambda *a: pytest.fail("drew numbers before refusing"))
    spec = {"tokens": 4096, "d_model": 1024, "heads": 8, "d_k": 64}
    with pytest.raises(tracer.ScenarioError) as info:
        tracer.scenario.build({"random": spec})
    gib = float(str(info.value).split("needs about ")[1].split(" GiB")[0])
    one_head = 5 * 4096 * 4096 * 8 / 2**30  # scores, scaled, exp, weights... of one head, float64
    assert info.value.field == "random" and one_head <= gib <= 8 * one_head
    assert "(1.0 GiB of RAM)" in str(info.value)


def test_a_byte_order_mark_is_fine(tmp_path):
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    assert tracer.load_scenario(path).n == 2


def test_a_file_name_with_a_newline_still_gives_one_line(tmp_path):
    path = tmp_path / "two\nlines.toml"
    path.write_text("x = [[1, 2], [3]]\n")
    with pytest.raises(tracer.ScenarioError) as info:
        tracer.load_scenario(path)
    assert "\n" not in str(info.value) and "two\\nlines.toml" in str(info.value)


def test_a_huge_quoted_value_is_cut_short(tmp_path):
    path = tmp_path / "long.toml"
    path.write_text('layout = "' + "r" * 100_000 + '"\n' + GOOD)
    with pytest.raises(tracer.ScenarioError) as info:
        tracer.load_scenario(path)
    assert len(str(info.value)) < 1000


def test_scenario_files_are_data_only(tmp_path):
    # nothing in a scenario is ever evaluated: code-like strings are just strings (and refused as numbers)
    flag = tmp_path / "ran"
    path = tmp_path / "evil.toml"
    path.write_text(f'title = "__import__(\'os\').system(\'touch {flag}\')"\n'
                    f'x = [["__import__(\'os\').system(\'touch {flag}\')"]]\n')
    with pytest.raises(tracer.ScenarioError, match=r"x\[0\]\[0\]: expected a number, got a string"):
        tracer.load_scenario(path)
    assert not flag.exists()


# ------------------------------------------------------------ arithmetic keys and step ids

@pytest.mark.parametrize("items, message", [
    (["scale"], "--set: expected KEY=VALUE (e.g. scale=sqrt), got 'scale'"),
    (["=3"], "--set: expected KEY=VALUE (e.g. scale=sqrt), got '=3'"),
    (["scal=3"], '--set scal: unknown key (did you mean "scale"?); expected one of scale, softmax_base, '
                 "normalize, stable, dtype, mask, layout, algorithm, block, topk"),
    (["softmax_base=1"], "--set softmax_base: expected e or a number > 1, got '1'"),
    (["softmax_base=0.5"], "--set softmax_base: expected e or a number > 1, got '0.5'"),
    (["softmax_base=-3"], "--set softmax_base: expected e or a number > 1, got '-3'"),
    (["softmax_base=inf"], "--set softmax_base: expected e or a number > 1, got 'inf'"),
    (["softmax_base=nan"], "--set softmax_base: expected e or a number > 1, got 'nan'"),
    (["softmax_base="], "--set softmax_base: expected e or a number > 1, got ''"),
    (["scale=0"], "--set scale: expected sqrt, floor, none or a number > 0, got '0'"),
    (["scale=sqr"], "--set scale: expected sqrt, floor, none or a number > 0, got 'sqr' (did you mean \"sqrt\"?)"),
    (["dtype=float16"], "--set dtype: expected float64 or float32, got 'float16' (did you mean \"float64\"?)"),
    (["dtype=int"], "--set dtype: expected float64 or float32, got 'int'"),
    (["stable=maybe"], "--set stable: expected true or false, got 'maybe'"),
    (["normalize=sigmoid"], "--set normalize: expected softmax or relu, got 'sigmoid'"),
    (["layout=diagonal"], "--set layout: expected rows or columns, got 'diagonal'"),
    (["mask=casual"], "--set mask: expected none, causal, causal_lower_right, sliding:W, streaming:S:W, chunked:C or a 0/1 matrix like "
                      "[[1,0],[1,1]], got 'casual' "
                      "(did you mean \"causal\"?)"),
])
def test_bad_set_options(items, message):
    with pytest.raises(tracer.ScenarioError) as info:
        parse_set(items)
    assert str(info.value) == message


def test_good_set_options_parse():
    assert parse_set(["scale = sqrt", "softmax_base=2", "mask=[[1,0],[1,1]]"]) == {
        "scale": " sqrt", "softmax_base": "2", "mask": "[[1,0],[1,1]]"}
    assert resolve("exact", parse_set(["mask=[[1,0],[1,1]]"])).mask == [[1, 0], [1, 1]]


@pytest.mark.parametrize("preset, overrides", [
    ("by_hand", {}), (None, {}), (["exact"], {}), ("exact", {"scale": -1}), ("exact", {"scale": 10**400}),
    ("exact", {"softmax_base": True}), ("exact", {"stable": 2}), ("exact", {"nope": 1}), ("exact", [("scale", 1)]),
    ("exact", {"dtype": ["float32"]}), ("exact", {"mask": "[[1, 0"}), ("exact", {"normalize": None}),
])
def test_bad_arithmetic_through_resolve(preset, overrides):
    with pytest.raises(tracer.ScenarioError):
        resolve(preset, overrides)


def test_a_mask_override_of_the_wrong_size_names_the_override_not_the_file():
    with pytest.raises(tracer.ScenarioError) as info:
        tracer.run("by_hand", mask=[[1, 0], [1, 1]])
    assert str(info.value).startswith("mask: expected a 4 × 4 matrix (key × query), got 2 × 2 (for ")
    assert str(info.value).endswith("by_hand.toml)") and info.value.source is None


@pytest.mark.parametrize("word", ["STREAMING:1:2", "Causal", "SLIDING:2", "None"])
def test_a_mask_word_is_as_strict_in_set_as_in_a_file(word):
    """The file refuses `mask = "STREAMING:1:2"` (the corpus's mask_streaming_capitalised): so
    does --set, and the arithmetic keys of run."""
    with pytest.raises(tracer.ScenarioError, match=f"^--set mask: expected none, causal, .* got '{word}'"):
        parse_set([f"mask={word}"])
    with pytest.raises(tracer.ScenarioError, match=f"^mask: expected none, causal, .* got '{word}'"):
        tracer.run("by_hand", mask=word)


@pytest.mark.parametrize("step", ["h1.z", "nope", "", "h0.weights ", "H0.z", "h-1.z"])
def test_unknown_step(step):
    trace = tracer.run("by_hand")
    with pytest.raises(tracer.ScenarioError, match="unknown step"):
        trace[step]


@pytest.mark.parametrize("row, col", [(4, 0), (0, 4), (-1, 0), (0, -5), (10**20, 0)])
def test_explain_outside_the_matrix(row, col):
    with pytest.raises(tracer.ScenarioError):
        tracer.run("by_hand").explain("h0.weights", row, col)


# ------------------------------------------------------------ your own arrays

W = np.ones((3, 2))
ARRAYS = {  # keyword arguments of from_arrays → the message it must give
    "x 3-D": (dict(x=np.ones((2, 3, 1))), "x: expected a non-empty 2-D array, got shape (2, 3, 1)"),
    "x 1-D": (dict(x=np.ones(3)), "x: expected a non-empty 2-D array, got shape (3,)"),
    "x 0-D": (dict(x=np.float64(1)), "x: expected a matrix (a non-empty list of rows of numbers), got a number (1.0)"),
    "x empty": (dict(x=np.ones((0, 3))), "x: expected a non-empty 2-D array, got shape (0, 3)"),
    "x bool": (dict(x=np.ones((2, 3), dtype=bool)), "x: expected an array of numbers (int or float), got dtype bool"),
    "x object": (dict(x=np.array([[1, "a", 2]], dtype=object)), "x: expected an array of numbers (int or float), got dtype object"),
    "x complex": (dict(x=np.ones((2, 3), dtype=complex)), "x: expected an array of numbers (int or float), got dtype complex128"),
    "x strings": (dict(x=np.array([["1", "2", "3"]])), "x: expected an array of numbers (int or float), got dtype <U1"),
    "x NaN": (dict(x=np.array([[1.0, 2.0, np.nan]])), "x[0][2]: expected a finite number within float64's range, got nan"),
    "x float16 inf": (dict(x=np.array([[1, 2, np.inf]], dtype=np.float16)), "x[0][2]: expected a finite number within float64's range, got inf"),
    "x None": (dict(x=None), "x: expected a matrix (a non-empty list of rows of numbers), got a NoneType"),
    "q 3-D empty": (dict(q=np.ones((0, 3, 2))), "weights.q: expected at least one matrix (one per head), got none"),
    "q 3-D NaN": (dict(q=np.full((2, 3, 2), np.nan)), "weights.q[0][0][0]: expected a finite number, got nan"),
    "q zero width": (dict(q=np.ones((1, 3, 0))), "weights.q[0]: expected a non-empty 2-D array, got shape (3, 0)"),
    "q 4-D": (dict(q=np.ones((1, 1, 3, 2))), "weights.q: expected a non-empty 2-D array, got shape (1, 1, 3, 2)"),
    "k heads": (dict(q=np.ones((3, 3, 2)), k=np.ones((2, 3, 2))),
                "weights.k: expected 3 matrices (one per head, as weights.q) or a number of groups that divides 3, "
                "got 2 matrices"),
    "v rows": (dict(v=np.ones((4, 2))), "weights.v: expected a 3 × d_v matrix (d_model × d_v, d_model = 3 from x), got 4 × 2"),
    "mask shape": (dict(mask=np.ones((3, 3), dtype=bool)), "mask: expected a 2 × 2 matrix (query × key), got 3 × 3"),
    "mask word": (dict(mask="upper"), "mask: expected one of none, causal, causal_lower_right, sliding:W, streaming:S:W, chunked:C or a matrix "
                  "of 0/1, 2 × 2, got a string ('upper')"),
    "tokens": (dict(tokens=["a"]), "tokens: expected 2 labels (one per token of x), got 1"),
    "tokens string": (dict(tokens="ab"), "tokens: expected a list of 2 strings, got a string ('ab')"),
    "layout": (dict(layout=None), "layout: expected \"rows\" or \"columns\", got a NoneType"),
    "name": (dict(name=None), "name: expected a string, got a NoneType"),
}


@pytest.mark.parametrize("case", sorted(ARRAYS))
def test_bad_arrays(case):
    given, message = ARRAYS[case]
    args = {"x": np.ones((2, 3)), "q": W, "k": W, "v": W, **given}
    with pytest.raises(tracer.ScenarioError) as info:
        tracer.from_arrays(**args)
    assert str(info.value) == message


def test_good_arrays_of_any_real_dtype_and_sequence():
    for dtype in (np.int8, np.uint16, np.int64, np.float16, np.float32, np.float64):
        x = np.arange(6, dtype=dtype).reshape(2, 3)
        assert tracer.from_arrays(x, W.astype(dtype), W, W).x.tolist() == [[0, 1, 2], [3, 4, 5]]
    rows = [np.array([1.0, 2.0, 3.0]), (4, 5, np.int64(6))]  # rows as arrays or tuples, NumPy scalars
    assert tracer.from_arrays(rows, W, W, W, mask=np.eye(2, dtype=bool)).x.tolist() == [[1, 2, 3], [4, 5, 6]]


@pytest.mark.parametrize("heads", [0, -1, 2.5, True, None, "8"])
def test_alibi_slopes_of_no_heads_is_one_line_naming_heads(heads):
    """tracer.alibi_slopes(0) was a math domain error from log2(0)."""
    with pytest.raises(tracer.ScenarioError, match=r"^heads: expected a whole number ≥ 1 \(one slope per head\), got "):
        tracer.alibi_slopes(heads)


def test_alibi_slopes_beyond_memory_are_refused_before_allocating():
    with pytest.raises(tracer.ScenarioError, match=r"^heads: 100000000000000000000 slopes needs about "):
        tracer.alibi_slopes(10**20)
    assert tracer.alibi_slopes(np.int64(2)).tolist() == [2.0 ** -4, 2.0 ** -8]   # 2^(−8(h+1)/H), H = 2
