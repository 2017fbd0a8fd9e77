"""Issue 25, items 12–14: numbers too large to mean what they say are refused naming the key and
the largest value accepted (never a MemoryError or numba's SystemError), and markup in a title or
a token is escaped in the md worksheet as in the SVG."""
import numpy as np
import pytest

import tracer
from tui.cli import main


def refused(capsys, argv, *words):
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("attnsim: error: "), err
    for word in words:
        assert word in err[0], (word, err[0])


@pytest.mark.parametrize("width", ["9223372036854775808", "9" * 5000, "2147483648", "0", "-3", "١٢"])
def test_a_sliding_window_beyond_the_largest_is_one_line(capsys, width):
    refused(capsys, ["show", "by_hand", "--set", f"mask=sliding:{width}", "--step", "h0.z"],
            "--set mask", "2147483647")


@pytest.mark.parametrize("block", ["2147483648", "9" * 400, "1e30"])
def test_a_block_beyond_the_largest_is_one_line(capsys, block):
    refused(capsys, ["show", "by_hand", "--set", "algorithm=online", "--set", f"block={block}", "--step", "h0.z"],
            "--set block", "2147483647")


def test_the_largest_block_runs_as_one_block_of_every_key():
    wide = tracer.run("gpt_causal", algorithm="online", block=2**31 - 1)
    assert [s.id for s in wide.steps if s.id.startswith("h0.blk")][-1].startswith("h0.blk0.")
    assert abs(wide["h0.z"] - tracer.run("gpt_causal")["h0.z"]).max() < 1e-12


def test_a_rope_offset_past_float64s_exact_positions_is_refused():
    arrays = dict(x=[[1.0, 0.0], [0.0, 1.0]], q=[[1.0, 0.0], [0.0, 1.0]], k=[[1.0, 0.0], [0.0, 1.0]],
                  v=[[1.0], [2.0]])
    ok = tracer.from_arrays(**arrays, rope=dict(base=10000.0, style="half", offset=2**53 - 1))
    assert ok.rope["offset"] == 2**53 - 1
    for offset in (2**53, 10**18):
        with pytest.raises(tracer.ScenarioError, match=r"rope.offset: expected at most 9007199254740991 for 2 tokens"):
            tracer.from_arrays(**arrays, rope=dict(base=10000.0, style="half", offset=offset))


HOSTILE = ['<script>alert(1)</script>', '<img src=x onerror=alert(1)>']


def test_markup_in_a_title_token_or_lesson_is_escaped_in_md(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text(f'title = "{HOSTILE[0]}"\ndescription = "{HOSTILE[1]} & more"\n'
                    f'tokens = [\'{HOSTILE[0]}\', \'{HOSTILE[1]}\']\n'
                    'x = [[1, 0], [0, 1]]\n[weights]\nq = [[1, 0], [0, 1]]\nk = [[1, 0], [0, 1]]\nv = [[1], [2]]\n')
    out = tmp_path / "s.md"
    assert main(["export", str(path), "-o", str(out)]) == 0
    text = out.read_text()
    assert "<script" not in text and "<img" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert "&amp; more" in text


@pytest.mark.parametrize("offset", [np.uint64(2**64 - 1), np.int64(2**63 - 1), np.uint64(2**53)])
def test_a_numpy_offset_cannot_wrap_past_the_check(offset):
    """offset + n − 1 in NumPy's integers wraps around (2^64 − 1 + 1 is 0): compared as a Python int."""
    arrays = dict(x=[[1.0, 0.0], [0.0, 1.0]], q=[[1.0, 0.0], [0.0, 1.0]], k=[[1.0, 0.0], [0.0, 1.0]],
                  v=[[1.0], [2.0]])
    with pytest.raises(tracer.ScenarioError, match=r"rope.offset: expected at most 9007199254740991 for 2 tokens"):
        tracer.from_arrays(**arrays, rope=dict(base=10000.0, style="half", offset=offset))
