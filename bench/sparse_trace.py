"""`python -m bench.sparse_trace`: the engine's trace of one DeepSeek-V3.2-shaped layer at 4096 tokens
(tracer.from_model, tracer.run, every head computed), with its lightning indexer keeping k = 2048
and k = 256 keys a query, against the same layer traced dense (the same weights under DeepSeek V3's
config: no indexer) and against transformers' eager forward of the same checkpoint.

DeepSeek-V3.2's attention shapes are kept (d_model 7168, latent ranks 1536/512, nope 128 + rope 64,
values 128, index heads of 128, its yarn rotary); scaled to fit a 24 GiB machine: 16 query heads (of
128) and 8 index heads (of 64), one layer with a small dense MLP (256), a vocabulary of 64 words.
The checkpoint (random float32 weights, transformers' own initialisation, seeded; about 0.2 GB) is
written once to a cache folder. Each run is a fresh process, timed after its imports (and, for
attnsim, its kernels loaded); peak memory is the growth of the resident set.

    python -m bench.sparse_trace                       # k = 2048 and 256, 4096 tokens
    python -m bench.sparse_trace --tokens 1024 --topk 128
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from .measure import _status, fresh_probe

SHAPE = dict(hidden_size=7168, num_attention_heads=16, num_key_value_heads=16, q_lora_rank=1536, kv_lora_rank=512,
             qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, num_hidden_layers=1, first_k_dense_replace=1,
             intermediate_size=256, vocab_size=64, max_position_embeddings=163840, rms_norm_eps=1e-6,
             n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=64, n_group=1, topk_group=1,
             bos_token_id=0, eos_token_id=1, tie_word_embeddings=False,
             rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=40.0, beta_fast=32.0, beta_slow=1.0,
                                  original_max_position_embeddings=4096, mscale=1.0, mscale_all_dim=1.0))
INDEXER = dict(index_n_heads=8, index_head_dim=128, index_topk=2048)
WORDS = 60
WARM = 768   # tokens of the warm-up trace: enough index heads × n² for the indexer's compiled kernel
WAYS = ("attnsim", "transformers")


def text(tokens: int) -> str:
    return " ".join(f"w{i * 7 % WORDS}" for i in range(tokens))   # one word-level token per word


def cache_folder() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(root) / "attnsim-bench" / "deepseek-v32-shape"


def write_checkpoint(folder: Path) -> None:
    """`sparse/`: the DeepSeek V3.2 checkpoint (transformers' initialisation, seeded) and a word-level
    tokenizer; `dense/`: the same tensors (a link) under DeepSeek V3's config, which has no indexer;
    a marker file last, so that an interrupted write is redone."""
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers
    torch.manual_seed(0)
    model = transformers.DeepseekV32ForCausalLM(transformers.DeepseekV32Config(**SHAPE, **INDEXER)).float()
    model.save_pretrained(folder / "sparse", safe_serialization=True)
    tok = Tokenizer(models.WordLevel({f"w{i}": i + 2 for i in range(WORDS)} | {"<unk>": 62}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    dense = folder / "dense"
    dense.mkdir(exist_ok=True)
    transformers.DeepseekV3Config(**SHAPE, architectures=["DeepseekV3ForCausalLM"]).save_pretrained(dense)
    if not (dense / "model.safetensors").exists():
        os.link(folder / "sparse" / "model.safetensors", dense / "model.safetensors")
    for place in (folder / "sparse", dense):
        tok.save(str(place / "tokenizer.json"))
    (folder / "complete").write_text("1")


def _attnsim(folder: str, tokens: int, topk: int) -> dict:
    """from_model, run (the indexer's choice for a sparse layer) and every head and the output:
    each one's seconds, and the bytes the trace holds at the end (a lazy trace keeps a few heads)."""
    import tracer
    times, start = {}, time.perf_counter()
    scenario = tracer.from_model(folder, text(tokens), 0)
    times["from_model"] = time.perf_counter() - start
    start = time.perf_counter()
    trace = tracer.run(scenario, **({"topk": topk} if scenario.sparse is not None else {}))
    times["run"] = time.perf_counter() - start
    start = time.perf_counter()
    trace.compute_all()
    times["heads"] = time.perf_counter() - start
    return dict(times, held=trace.held_bytes(), whole=trace.nbytes(), lazy=trace.lazy)


def _transformers(folder: str, tokens: int, topk: int) -> dict:
    """from_pretrained (eager attention, float32) and one forward with output_attentions."""
    import torch
    import transformers
    from tokenizers import Tokenizer
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    ids = Tokenizer.from_file(os.path.join(folder, "tokenizer.json")).encode(text(tokens)).ids
    start = time.perf_counter()
    extra = {"index_topk": topk} if folder.rstrip("/").endswith("sparse") else {}
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager",
                                                              dtype=torch.float32, **extra).eval()
    loaded = time.perf_counter() - start
    with torch.no_grad():
        start = time.perf_counter()
        out = model(torch.tensor([ids]), output_attentions=True)
        forward = time.perf_counter() - start
    return dict(load=loaded, forward=forward, held=sum(a.numel() * a.element_size() for a in out.attentions))


def probe(way: str, folder: str, tokens: str, topk: str) -> None:
    """One contender in this fresh process: its seconds, and the resident set's growth at its highest."""
    if way == "attnsim":
        _attnsim(folder, WARM, WARM)   # every kernel the run takes loaded (or compiled) before timing
        call = _attnsim
    else:
        import torch  # noqa: F401
        import transformers  # noqa: F401
        call = _transformers
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = _status("VmRSS")
    got = call(folder, int(tokens), int(topk))
    print(json.dumps(dict(got, peak=_status("VmHWM") - base)))


def measure(folder: Path, tokens: int, topks: list[int], reps: int) -> dict:
    """Median of `reps` fresh runs of each (contender, layer) pair, the pairs in turn each round."""
    pairs = [(way, "dense", 0) for way in WAYS] + [(way, "sparse", k) for k in topks for way in WAYS]
    runs = {pair: [] for pair in pairs}
    for _ in range(reps):
        for way, kind, k in pairs:
            print(f"bench.sparse_trace: {way}, {kind}{f' k = {k}' if k else ''} …", file=sys.stderr, flush=True)
            runs[(way, kind, k)].append(fresh_probe("bench.sparse_trace", way, str(folder / kind), str(tokens),
                                                    str(k or tokens)))
    return {pair: {key: got[0][key] if isinstance(got[0][key], bool) else statistics.median(r[key] for r in got)
                   for key in got[0]} for pair, got in runs.items()}


def table(got: dict, tokens: int, topks: list[int]) -> list[str]:
    gib = lambda b: f"{b / 2**30:.2f} GiB"  # noqa: E731
    rows = ["| layer | contender | load (from_model / from_pretrained) | run + every head (forward) | total | "
            "held at the end | peak growth |", "| --- | --- | --- | --- | --- | --- | --- |"]
    total = {}
    for (way, kind, k), r in got.items():
        name = "dense (no indexer)" if kind == "dense" else f"sparse, k = {k}"
        if way == "attnsim":
            load, work = r["from_model"], r["run"] + r["heads"]
            held = f"{gib(r['held'])} (lazy; whole {gib(r['whole'])})" if r["lazy"] else gib(r["held"])
        else:
            load, work, held = r["load"], r["forward"], f"{gib(r['held'])} (its attentions)"
        total[(way, kind, k)] = (load + work, work)
        rows.append(f"| {name} | {way} | {load:.2f} s | {work:.2f} s | {load + work:.2f} s | {held} | "
                    f"{gib(r['peak'])} |")
    rows.append("")
    for k in topks:
        s, d = total[("attnsim", "sparse", k)], total[("attnsim", "dense", 0)]
        t = total[("transformers", "sparse", k)]
        rows.append(f"k = {k}: attnsim sparse ÷ dense: total {s[0] / d[0]:.2f}, run + heads {s[1] / d[1]:.2f}; "
                    f"attnsim ÷ transformers (sparse): total {s[0] / t[0]:.2f}, "
                    f"run + heads ÷ forward {s[1] / t[1]:.2f}")
    d, t = total[("attnsim", "dense", 0)], total[("transformers", "dense", 0)]
    rows.append(f"dense: attnsim ÷ transformers: total {d[0] / t[0]:.2f}, run + heads ÷ forward {d[1] / t[1]:.2f}")
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.sparse_trace", description=__doc__.split("\n")[0])
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--topk", type=int, nargs="+", default=[2048, 256])
    p.add_argument("--reps", type=int, default=1, help="fresh runs of each contender, in turn (the median is shown)")
    p.add_argument("--folder", type=Path, default=None, help="where the checkpoint is kept (default: a cache folder)")
    p.add_argument("--probe", nargs=4, metavar=("WAY", "FOLDER", "TOKENS", "TOPK"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.probe:
        probe(*args.probe)
        return 0
    folder = args.folder or cache_folder()
    if not (folder / "complete").is_file():
        print(f"bench.sparse_trace: writing a DeepSeek-V3.2-shaped checkpoint to {folder} …", file=sys.stderr,
              flush=True)
        write_checkpoint(folder)
    got = measure(folder, args.tokens, args.topk, args.reps)
    print(f"DeepSeek-V3.2-shaped layer (16 heads, 8 index heads; random float32 weights), {args.tokens} tokens; "
          f"attnsim in float64 (its default), transformers eager in float32; median of {args.reps} fresh run(s) "
          f"each; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}\n")
    print("\n".join(table(got, args.tokens, args.topk)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
