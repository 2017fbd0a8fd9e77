"""`python -m bench.sparse`: attention that chooses its keys, on a DeepSeek-V3.2-shaped layer (d_model
7168, 128 heads of latent attention with ranks 1536/512, nope 128 + rope 64, values 128; a lightning
indexer of 64 heads of 128) at 4096 tokens, its weights those transformers initialises
(DeepseekV32Attention, seeded), x random.

Measured, in float32 (transformers' own dtype for this layer) unless --dtype says otherwise:
  - the indexer: attnsim's compiled kernel (n × n scores kept, as a trace keeps idx.scores, and not
    kept) against transformers' DeepseekV32Indexer on the same q, k and w, and whether they choose
    the same keys;
  - the attention over the chosen keys (k = 2048 and k = 256) against the same kernel over every
    earlier key (dense), both in the absorbed form (keys c_kv ‖ k_pe shared by the heads), and
    attnsim's fused dense kernel (attend_heads, keys rebuilt per head);
  - bytes: a trace's per-head n × n steps, dense against kept cells only, and the indexer's steps;
  - transformers' forward of the whole layer (sdpa; eager would hold 128 × n × n weights), in a fresh
    process: seconds and peak memory (the growth of the resident set).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .measure import _status

SHAPE = dict(hidden_size=7168, num_attention_heads=128, num_key_value_heads=128, q_lora_rank=1536, kv_lora_rank=512,
             qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, index_n_heads=64, index_head_dim=128,
             num_hidden_layers=1, vocab_size=256, intermediate_size=256, moe_intermediate_size=64,
             n_routed_experts=8, num_experts_per_tok=2, n_group=1, topk_group=1, max_position_embeddings=8192)
STEPS_PER_HEAD = 5   # a head's n × n steps in a trace: scores, scaled, masked, exp, weights


def _layer(tokens: int, topk: int):
    """transformers' attention module with V3.2's shapes (seeded), its config and x (1 × n × d)."""
    import torch
    import transformers
    from transformers.models.deepseek_v32 import modeling_deepseek_v32 as m
    torch.manual_seed(0)
    cfg = transformers.DeepseekV32Config(**SHAPE, index_topk=topk, rope_parameters=dict(rope_type="default",
                                                                                        rope_theta=10000.0))
    cfg._attn_implementation = "sdpa"
    attn = m.DeepseekV32Attention(cfg, 0).float().eval()
    with torch.no_grad():
        for p in attn.parameters():   # transformers' init: N(0, 0.02²) weights, unit norm gains
            p.copy_(torch.randn_like(p) * 0.02 if p.ndim == 2 else torch.ones_like(p))
    x = torch.randn(1, tokens, SHAPE["hidden_size"], generator=torch.Generator().manual_seed(1))
    return attn, cfg, x, m.DeepseekV32RotaryEmbedding(cfg)


def _run_transformers(attn, x, rot, caught: dict) -> float:
    import torch
    n = x.shape[1]
    pos = torch.arange(n)[None]
    mask = torch.full((n, n), float("-inf")).triu(1)[None, None]
    hooks = [attn.indexer.register_forward_hook(lambda mod, a, out: caught.__setitem__("chosen", out[0].numpy())),
             attn.indexer.register_forward_pre_hook(lambda mod, a: caught.__setitem__("start", time.perf_counter())),
             attn.indexer.register_forward_hook(lambda mod, a, o: caught.__setitem__("indexer", time.perf_counter()))]
    try:
        with torch.no_grad():
            start = time.perf_counter()
            attn(x, rot(x, pos), mask, position_ids=pos)
            seconds = time.perf_counter() - start
    finally:
        for h in hooks:
            h.remove()
    caught["indexer"] -= caught.pop("start")
    return seconds


def probe(tokens: str, topk: str) -> None:
    """transformers' forward of the layer in this fresh process: seconds, its indexer's seconds,
    peak bytes; the keys it chose, saved for the parent to compare."""
    import torch
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    attn, _, x, rot = _layer(int(tokens), int(topk))
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base, caught = _status("VmRSS"), {}
    seconds = _run_transformers(attn, x, rot, caught)
    out = Path(tempfile.gettempdir()) / f"attnsim-bench-sparse-{os.getpid()}.npy"
    np.save(out, caught["chosen"])
    print(json.dumps({"seconds": seconds, "indexer": caught["indexer"], "peak": _status("VmHWM") - base,
                      "chosen": str(out)}))


def inputs(tokens: int, dtype) -> dict:
    """The layer's indexer inputs and absorbed attention inputs, computed from transformers' module
    in NumPy in `dtype` (the same formulas as tracer/models/dsa_block.py)."""
    from tracer.mechanisms.indexer import rotary, scores
    from tracer.models.dsa_block import LATENT_EPS, layer_norm, rms
    attn, cfg, x, _ = _layer(tokens, 1)
    w = {k: v.numpy().astype(dtype) for k, v in attn.state_dict().items()}
    h = x[0].numpy().astype(dtype)
    H, nope, r, rank = 128, 128, 64, 512
    theta = rotary.angles({"base": 10000.0}, np.arange(tokens), r)
    c_q = rms(h @ w["q_a_proj.weight"].T, w["q_a_layernorm.weight"], LATENT_EPS)
    iq = rotary.turn((c_q @ w["indexer.wq_b.weight"].T).reshape(tokens, 64, 128).transpose(1, 0, 2), theta, "half")
    ik = rotary.turn(layer_norm(h @ w["indexer.wk.weight"].T, w["indexer.k_norm.weight"], w["indexer.k_norm.bias"],
                                1e-6), theta, "half")
    q = (c_q @ w["q_b_proj.weight"].T).reshape(tokens, H, nope + r)
    kv = h @ w["kv_a_proj_with_mqa.weight"].T
    c_kv = rms(kv[:, :rank], w["kv_a_layernorm.weight"], LATENT_EPS)
    w_uk = w["kv_b_proj.weight"].reshape(H, nope + 128, rank)[:, :nope]           # head × nope × rank
    q_abs = np.concatenate([np.einsum("thn,hnr->thr", q[..., :nope], w_uk),
                            rotary.turn(q[..., nope:].transpose(1, 0, 2), theta, "interleaved").transpose(1, 0, 2)], -1)
    keys = np.concatenate([c_kv, rotary.turn(kv[:, rank:], theta, "interleaved")], -1)
    k_up = (c_kv @ w["kv_b_proj.weight"].T).reshape(tokens, H, nope + 128)
    del attn, x, kv
    c = lambda a: np.ascontiguousarray(a, dtype=dtype)  # noqa: E731
    idx_w = scores.head_weights(h, w["indexer.weights_proj.weight"])
    return dict(idx_q=c(iq.transpose(1, 0, 2)), idx_k=c(ik), idx_w=c(idx_w),
                q_abs=c(q_abs), keys=c(keys), values=c(c_kv), scale=(nope + r) ** -0.5,
                q_heads=c(np.concatenate([q[..., :nope], q_abs[..., rank:]], -1).transpose(1, 0, 2)),
                k_heads=c(np.concatenate([k_up[..., :nope].transpose(1, 0, 2),
                                          np.broadcast_to(keys[None, :, rank:], (H, tokens, r))], -1)),
                v_heads=c(k_up[..., nope:].transpose(1, 0, 2)))


def attnsim_side(tokens: int, topks: list[int], dtype, reps: int) -> dict:
    """Median seconds (over `reps` rounds, every contender once a round: the machine's load moves)
    of the indexer kernel and of the attention over every earlier key and over the chosen keys;
    the choices, in dtype and in float64."""
    from tracer import kernels
    from tracer.arithmetic import resolve
    from tracer.kernels import indexer as K
    from .measure import round_robin
    a = inputs(tokens, dtype)
    causal, scale = np.arange(1, tokens + 1), 128 ** -0.5
    index = (a["idx_q"], a["idx_k"], a["idx_w"])
    wide = [x.astype(np.float64) for x in index]   # a trace's own dtype
    out = {"index": dict(zip(("idx_q", "idx_k", "idx_w"), index))}
    for top in topks:   # how much float32 alone moves the choice: the same indexer in float64
        out[f"chosen_{top}"] = K.index_topk(*index, causal, top, scale, keep_scores=False)[1]
        out[f"chosen64_{top}"] = K.index_topk(*wide, causal, top, scale, keep_scores=False)[1]
    every = np.where(np.arange(tokens)[None, :] <= np.arange(tokens)[:, None], np.arange(tokens)[None, :], -1)
    z = np.empty((tokens, 128 * 128), dtype=dtype)
    rule = kernels.rule(resolve("exact", {"dtype": np.dtype(dtype).name}), "causal", 192)
    heads = (a["q_heads"], a["k_heads"], a["v_heads"])
    kernels.attend_heads(*(x[:, :64].copy() for x in heads), np.empty((64, 128 * 128), dtype=dtype), rule, None, 64)
    K.attend_chosen(a["q_abs"][:64].copy(), a["keys"][:64].copy(), a["values"][:64].copy(), every[:64, :64].copy(),
                    a["scale"])   # both compiled before any timing
    latent = (a["q_abs"], a["keys"], a["values"])
    calls = {"indexer_kept": lambda: K.index_topk(*index, causal, topks[0], scale),
             "indexer_f64": lambda: K.index_topk(*wide, causal, topks[0], scale),
             "dense_absorbed": lambda: K.attend_chosen(*latent, every, a["scale"]),
             "dense_fused": lambda: kernels.attend_heads(*heads, z, rule, None, 64)}
    for top in topks:
        calls[f"indexer_{top}"] = lambda top=top: K.index_topk(*index, causal, top, scale, keep_scores=False)
        calls[f"sparse_{top}"] = lambda top=top: K.attend_chosen(*latent, out[f"chosen_{top}"], a["scale"])
    out.update(round_robin(calls, reps, warm=False))
    return out


def trace_bytes(tokens: int, top: int, heads: int = 128, itemsize: int = 8) -> dict:
    """Bytes of a trace's per-head query × key steps: dense (every cell) against the kept cells
    only (a value and its key's index each), plus the indexer's idx.scores (n × n numbers) and
    idx.selected (n × n booleans), once for the layer."""
    kept = sum(min(t + 1, top) for t in range(tokens))
    return dict(dense=STEPS_PER_HEAD * heads * tokens * tokens * itemsize,
                sparse=STEPS_PER_HEAD * heads * kept * (itemsize + 4), indexer=tokens * tokens * (itemsize + 1))


def _compare(ours: np.ndarray, theirs: np.ndarray, index: dict) -> tuple[int, float]:
    """(queries whose chosen keys, among those they may see, are the same set; the largest gap
    between the k-th best index score and that of a key only one side chose, relative to the
    size of the terms summed (Σ_h |w_h|·ReLU(q_h·k), the scale of their rounding), the scores
    recomputed in float64 from our float32 q, k and w)."""
    same, gap = 0, 0.0
    q, k, w = (index[key] for key in ("idx_q", "idx_k", "idx_w"))
    for t in range(len(ours)):
        a, b = set(ours[t][ours[t] >= 0].tolist()), set(j for j in theirs[t].tolist() if j <= t)
        if a == b:
            same += 1
            continue
        votes = np.maximum(q[t].astype(np.float64) @ k[: t + 1].T.astype(np.float64), 0)   # heads × keys
        row, size = w[t].astype(np.float64) @ votes, np.abs(w[t].astype(np.float64)) @ votes
        bar = np.sort(row)[-len(a)]
        gap = max(gap, max(abs(row[j] - bar) / size[j] for j in a ^ b))
    return same, gap


def main(argv: list[str] | None = None) -> int:
    from .measure import fresh_probe
    p = argparse.ArgumentParser(prog="python -m bench.sparse", description=__doc__.split("\n")[0])
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--topk", type=int, nargs="+", default=[2048, 256])
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--no-transformers", action="store_true", help="attnsim's side only")
    p.add_argument("--reps", type=int, default=3, help="rounds of attnsim's timings (the median is shown)")
    p.add_argument("--probe", nargs=2, metavar=("TOKENS", "TOPK"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.probe:
        probe(*args.probe)
        return 0
    n = args.tokens
    ours = attnsim_side(n, args.topk, np.dtype(args.dtype), args.reps)
    print(f"DeepSeek-V3.2-shaped layer, {n} tokens, {args.dtype}, medians of {args.reps} rounds, load average "
          f"{os.getloadavg()[0]:.2f}")
    print(f"  indexer kernel, idx.scores kept: {ours['indexer_kept']:.2f} s ({ours['indexer_f64']:.2f} s in float64, "
          "a trace's default)")
    print(f"  dense attention over every earlier key: absorbed {ours['dense_absorbed']:.2f} s; "
          f"attnsim's fused kernel (keys rebuilt per head) {ours['dense_fused']:.2f} s")
    for top in args.topk:
        b = trace_bytes(n, top)
        same64 = sum(set(x.tolist()) == set(y.tolist()) for x, y in zip(ours[f"chosen_{top}"], ours[f"chosen64_{top}"]))
        print(f"  k = {top}: indexer {ours[f'indexer_{top}']:.2f} s + attention over the chosen keys "
              f"{ours[f'sparse_{top}']:.2f} s (dense absorbed ÷ sparse "
              f"{ours['dense_absorbed'] / ours[f'sparse_{top}']:.2f}); "
              f"trace bytes of the heads' n × n steps: dense {b['dense'] / 2**30:.1f} GiB, kept cells "
              f"{b['sparse'] / 2**30:.1f} GiB, + indexer {b['indexer'] / 2**20:.0f} MiB; float32 against float64 "
              f"(attnsim alone): the same keys for {same64} of {n} queries")
        if args.no_transformers:
            continue
        got = fresh_probe("bench.sparse", str(n), str(top))
        theirs = np.load(got["chosen"], allow_pickle=False)
        os.unlink(got["chosen"])
        same, gap = _compare(ours[f"chosen_{top}"], theirs, ours["index"])
        why = f" (the others swap keys within {gap:.1e} of the k-th best, relative to the terms summed)" \
            if same < n else ""
        print(f"    transformers (sdpa, float32): layer {got['seconds']:.2f} s, its indexer {got['indexer']:.2f} s, "
              f"peak {got['peak'] / 2**30:.2f} GiB; same keys chosen for {same} of {n} queries{why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
