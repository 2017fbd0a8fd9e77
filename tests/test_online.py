"""The online softmax (algorithm=online): z equals attention computed the ordinary way (a NumPy
softmax written here, and PyTorch's SDPA) for every block size, layout, mask and dtype; the block
steps follow the recursion, checked by hand in exact fractions; bad keys exit 2 with one line."""
from __future__ import annotations

import subprocess
import sys
import warnings
from fractions import Fraction

import numpy as np
import pytest

import tracer

N = 7   # not a multiple of most block sizes: the last block is short


def softmax_attention(x, wq, wk, wv, allowed, divisor, dtype):
    """z of one head the ordinary way (rows layout): S = QKᵀ/c, masked, softmax with the row max
    subtracted, A·V; a query with every key masked gets zeros."""
    x, wq, wk, wv = (np.asarray(a, dtype) for a in (x, wq, wk, wv))
    s = (x @ wq) @ (x @ wk).T / dtype(divisor)
    if allowed is not None:
        s = np.where(allowed, s, -np.inf)
    top = s.max(axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    p = np.exp(s - top)
    total = p.sum(axis=1, keepdims=True)
    w = np.divide(p, total, out=np.zeros_like(p), where=total > 0)
    return w @ (x @ wv)


def _case(mask_name: str):
    rng = np.random.default_rng(3)
    x, wq, wk, wv = rng.normal(size=(N, 5)), rng.normal(size=(5, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    allowed = {"none": None, "causal": np.tril(np.ones((N, N), bool))}.get(mask_name)
    if mask_name == "matrix":   # query 2 sees nothing; the others a scattered set
        allowed = rng.random((N, N)) < 0.5
        allowed[2] = False
        allowed[np.arange(N) != 2, 0] = True
    return x, wq, wk, wv, allowed


@pytest.mark.parametrize("mask_name", ["none", "causal", "matrix"])
@pytest.mark.parametrize("layout", ["rows", "columns"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_online_z_equals_softmax_attention_for_every_block_size(mask_name, layout, dtype):
    x, wq, wk, wv, allowed = _case(mask_name)
    mask = "none" if allowed is None else allowed.astype(int).tolist()
    if layout == "columns":
        sc = tracer.from_arrays(x.T, wq.T, wk.T, wv.T, layout="columns",
                                mask=mask if isinstance(mask, str) else np.array(mask).T.tolist())
    else:
        sc = tracer.from_arrays(x, wq, wk, wv, mask=mask)
    want = softmax_attention(x, wq, wk, wv, allowed, np.sqrt(3), np.float64)
    tol = 1e-5 if dtype == "float32" else 1e-12
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tracer.AttentionWarning)
        for block in range(1, N + 1):
            t = tracer.run(sc, "exact", algorithm="online", block=block, dtype=dtype)
            z = t.rows("h0.z")
            assert z.dtype == np.dtype(dtype)
            np.testing.assert_allclose(z, want, rtol=tol, atol=tol, err_msg=f"block {block}")
            blocks = -(-N // block)
            assert f"h0.blk{blocks - 1}.acc" in t and f"h0.blk{blocks}.acc" not in t
            for gone in ("h0.scores", "h0.scaled", "h0.masked", "h0.exp", "h0.sums", "h0.weights"):
                assert gone not in t
            if mask_name == "matrix":
                assert (z[2] == 0).all()   # every key masked: zeros, as the standard trace


def test_blocks_follow_the_recursion_in_float64():
    """Each block's steps against the recursion written out here, cell by cell."""
    x, wq, wk, wv, allowed = _case("causal")
    t = tracer.run(tracer.from_arrays(x, wq, wk, wv, mask="causal"), algorithm="online", block=3)
    q, k, v = x @ wq, x @ wk, x @ wv
    m, total, acc = np.full(N, -np.inf), np.zeros(N), np.zeros((N, 2))
    for j, start in enumerate(range(0, N, 3)):
        keys = range(start, min(N, start + 3))
        s = np.array([[q[i] @ k[c] / np.sqrt(3) if c <= i else -np.inf for c in keys] for i in range(N)])
        new = np.maximum(m, s.max(axis=1))
        rescale = np.array([1.0 if a == b else np.exp(a - b) for a, b in zip(m, new)])
        p = np.exp(s - new[:, None])
        total = rescale * total + p.sum(axis=1)
        acc = rescale[:, None] * acc + p @ v[list(keys)]
        m = new
        for kind, want in (("scores", s), ("max", m[:, None]), ("rescale", rescale[:, None]), ("powers", p),
                           ("sums", total[:, None]), ("acc", acc)):
            np.testing.assert_allclose(t.rows(f"h0.blk{j}.{kind}"), want, rtol=1e-12, atol=1e-14, err_msg=kind)
    assert (t.rows("h0.blk0.rescale") == 0).all()   # from m = −∞: nothing seen before


def test_by_hand_last_sums_are_the_worksheet_column_sums():
    t = tracer.run("by_hand", algorithm="online", block=2)
    # worksheet: powers 3^s down each column, x1..x4; summed by hand per block of two keys
    first = [3 + 9, 3 + 3, 3 + 1, 1 + 9]
    last = [Fraction(46, 3), Fraction(28, 3), Fraction(22, 3), 12]
    assert t["h0.blk0.sums"][0].tolist() == [float(v) for v in first]
    np.testing.assert_allclose(t["h0.blk1.sums"][0], [float(v) for v in last], rtol=1e-15)
    assert (t["h0.blk0.max"] == 0).all() and (t["h0.blk1.rescale"] == 1).all()   # stable=false
    np.testing.assert_allclose(t["h0.z"], tracer.run("by_hand")["h0.z"], rtol=1e-14)


def test_flash_query_x5_worked_by_hand():
    """x5 = (4, 0, 0, 1) against the six keys: q·k = 4, 0, 13, 0, 17, 2, then ⌊÷2⌋ = 2, 0, 6, 0, 8, 1;
    blocks of two: maxima 2, 6, 8; rescales 0, 3^(2−6) = 1/81, 3^(6−8) = 1/9."""
    t = tracer.run("flash")
    i = 4
    col = lambda kind, j: [Fraction(float(v)).limit_denominator(10**6) for v in t.rows(f"h0.blk{j}.{kind}")[i]]  # noqa: E731
    assert [col("scores", j) for j in range(3)] == [[2, 0], [6, 0], [8, 1]]
    assert [col("max", j) for j in range(3)] == [[2], [6], [8]]
    assert [col("rescale", j) for j in range(3)] == [[0], [Fraction(1, 81)], [Fraction(1, 9)]]
    assert col("powers", 2) == [1, Fraction(1, 2187)]
    sums = [Fraction(10, 9), Fraction(10, 9) / 81 + 1 + Fraction(1, 729)]
    sums.append(sums[1] / 9 + 1 + Fraction(1, 2187))
    assert [col("sums", j)[0] for j in range(3)] == sums
    acc0 = [Fraction(1), Fraction(1, 81) + 3]           # first feature of v: 1, 0, 3, 0, 4, 0
    acc0.append(acc0[1] / 9 + 4)
    assert [col("acc", j)[0] for j in range(3)] == acc0
    assert t.rows("h0.z")[i, 0] == pytest.approx(float(acc0[2] / sums[2]), rel=1e-14)
    text = t.explain("h0.blk2.acc", i, 0)
    assert "acc ← acc·3^(m_old − m_new) + powers·V_blk" in text and "244/81·3^(6 − 8)" in text and text.endswith("3160/729 ≈ 4.335")
    assert "= 3^(2 − 6) = 1/81" in t.explain("h0.blk1.rescale", i, 0)


def test_stable_false_keeps_max_zero_and_rescale_one():
    t = tracer.run("flash", stable=False)
    for j in range(3):
        assert (t[f"h0.blk{j}.max"] == 0).all() and (t[f"h0.blk{j}.rescale"] == 1).all()
    np.testing.assert_allclose(t["h0.z"], tracer.run("flash")["h0.z"], rtol=1e-14)


def test_against_pytorch_sdpa_several_heads_causal():
    torch = pytest.importorskip("torch")
    sc = tracer.load_scenario("multi_head")
    sc = tracer.from_arrays(sc.x, sc.w_q, sc.w_k, sc.w_v, mask="causal")
    t = tracer.run(sc, algorithm="online", block=2)
    x = torch.tensor(sc.x)
    for h in range(sc.heads):
        q, k, v = (x @ torch.tensor(w[h]) for w in (sc.w_q, sc.w_k, sc.w_v))
        z = torch.nn.functional.scaled_dot_product_attention(q[None, None], k[None, None], v[None, None], is_causal=True)
        np.testing.assert_allclose(t.rows(f"h{h}.z"), z[0, 0].numpy(), rtol=1e-12, atol=1e-12)


def test_compiled_path_keeps_statistics_and_recomputes_tiles():
    """A layer large enough for the compiled kernel: z as the NumPy path, the tiles recomputed on
    demand equal the NumPy path's, and the trace holds far fewer bytes than the standard one."""
    from tracer.scenario import build
    sc = build({"mask": "causal", "random": dict(seed=2, tokens=512, d_model=32, heads=4, d_k=8)})
    fast = tracer.run(sc, algorithm="online", block=48)
    slow = tracer.run(sc, algorithm="online", block=48, engine="stages")
    assert fast.engine == "fused"
    for sid in ("h3.z", "h3.blk5.max", "h3.blk5.sums", "h3.blk5.rescale"):
        np.testing.assert_allclose(fast[sid], slow[sid], rtol=1e-9, atol=1e-12, err_msg=sid)
    small = fast.held_bytes()
    for sid in ("h1.blk4.scores", "h1.blk4.powers", "h1.blk4.acc", "h1.blk10.acc"):
        a, b = fast[sid], slow[sid]
        assert ((a == b) | np.isclose(a, b, rtol=1e-9, atol=1e-12)).all(), sid
    standard = tracer.run(sc)
    np.testing.assert_allclose(fast["h2.z"], standard["h2.z"], rtol=1e-9, atol=1e-12)
    assert small * 8 <= standard.held_bytes()


@pytest.mark.parametrize("keys, field", [(dict(block=0), "block"), (dict(block=1.5), "block"),
                                         (dict(block="two"), "block"), (dict(algorithm="flash"), "algorithm"),
                                         (dict(algorithm="online", normalize="relu"), "algorithm")])
def test_bad_keys_are_scenario_errors(keys, field):
    with pytest.raises(tracer.ScenarioError) as err:
        tracer.run("by_hand", **keys)
    assert field in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("setting", ["block=0", "algorithm=fast", "block=-2"])
def test_cli_bad_key_exits_2_with_one_line(setting):
    got = subprocess.run([sys.executable, "-m", "tui", "show", "by_hand", "--set", setting],
                         capture_output=True, text=True)
    assert got.returncode == 2 and got.stdout == ""
    assert len(got.stderr.strip().splitlines()) == 1 and got.stderr.startswith("attnsim: error:")


def test_cli_diff_standard_against_online():
    got = subprocess.run([sys.executable, "-m", "tui", "diff", "flash", "--a", "by-hand", "--b", "by-hand",
                          "--set-b", "algorithm=standard"], capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    z = next(line for line in got.stdout.splitlines() if line.startswith("h0.z "))
    assert "equal up to rounding" in z and float(z.split()[1]) < 1e-12
