"""`python -m bench.linear`: one Gated DeltaNet layer of Qwen3.5-0.8B's shapes (d_model 1024, 16 key
and 16 value heads of 128, a causal convolution of 4; softmax layers of 8 query heads over 2 key/value
heads of 256) on 1024 tokens, in float32. A checkpoint with those shapes (random weights, one period
of the layer pattern: 3 linear layers and a softmax one, a small vocabulary) is written once by
transformers to a temporary folder (with a word-level tokenizer); then, each in a fresh process,
attnsim's trace of layer 0 as a user runs it (tracer.from_model on 1024 tokens, then
tracer.run(..., lazy=False), in float32 and in float64: every step computed but each head's states
and implied weights, 1 GiB and 64 MiB in float32, which are built when first read; and the same
with every step read), attnsim's layer alone
(its states, outputs and implicit weights: the compiled kernel alone, and the whole layer from its
projections to W_O) and transformers' forward of the same layer (its PyTorch fallback, as on any
machine without flash-linear-attention): seconds (best of REPS after a warm-up) and peak memory (the
growth of the resident set), each as a ratio to transformers'; then, in one process taking turns (so
that a loaded machine slows each alike), transformers' forward against attnsim's trace. Last, what
each kind of layer keeps while generating.
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

from .measure import fresh_probe

TOKENS, LAYER, REPS = 1024, 0, 5
# Qwen/Qwen3.5-0.8B's text_config (layers and vocabulary cut: the traced layer's shapes are the model's)
TEXT_CONFIG = dict(hidden_size=1024, num_attention_heads=8, num_key_value_heads=2, head_dim=256, intermediate_size=3584,
                   linear_num_key_heads=16, linear_num_value_heads=16, linear_key_head_dim=128,
                   linear_value_head_dim=128, linear_conv_kernel_dim=4, rms_norm_eps=1e-6, hidden_act="silu",
                   rope_parameters=dict(rope_type="default", rope_theta=10_000_000.0, partial_rotary_factor=0.25,
                                        mrope_section=[11, 11, 10], mrope_interleaved=True),
                   num_hidden_layers=4, vocab_size=4096, tie_word_embeddings=True)


TEXT = " ".join(f"w{i % 50}" for i in range(TOKENS))   # TOKENS tokens of the word-level tokenizer below


def write_checkpoint(folder: Path) -> None:
    """The model's weights, and a word-level tokenizer of 50 words (what tracer.from_model reads)."""
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers
    torch.manual_seed(0)
    model = transformers.Qwen3_5ForCausalLM(transformers.Qwen3_5TextConfig(**TEXT_CONFIG))
    model.save_pretrained(folder, safe_serialization=True)
    tok = Tokenizer(models.WordLevel({f"w{i}": i for i in range(50)} | {"<unk>": 51}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(folder / "tokenizer.json"))


def stream(d_model: int, tokens: int = TOKENS) -> np.ndarray:
    """The normed stream the layer reads: rows of unit root mean square, as after its RMSNorm."""
    h = np.random.default_rng(1).standard_normal((tokens, d_model))
    return (h / np.sqrt((h * h).mean(axis=1, keepdims=True))).astype(np.float32)


def measured(call, warm) -> dict:
    """Peak memory of one call (after `warm` has loaded and compiled what the call needs, on a few
    tokens), then its seconds, best of REPS."""
    from .measure import peak_during
    warm()
    out = {"peak": peak_during(call)}
    times = []
    for _ in range(REPS):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    out["seconds"] = min(times)
    return out


def read_all(trace) -> None:
    """Every step of a trace read once: what tracer.run keeps for its first read (a linear layer's
    states and implied weights, head by head) built too."""
    for step in trace.steps:
        trace.rows(step.id)


def probe_trace(folder: Path, dtype: str) -> dict:
    """The engine's whole trace of the layer, as a user runs it: tracer.from_model on the text (its
    seconds apart), then tracer.run(..., lazy=False) (every step now, but each head's states and
    implied weights, built when first read); then the same followed by every step read. Saves the
    layer's input (after its norm) and output for the comparison with transformers."""
    import tracer
    warm_scenario = tracer.from_model(folder, " ".join(TEXT.split()[:8]), LAYER)
    start = time.perf_counter()
    sc = tracer.from_model(folder, TEXT, LAYER)
    scenario_seconds = time.perf_counter() - start
    warm = lambda: read_all(tracer.run(warm_scenario, dtype=dtype, lazy=False))  # noqa: E731
    out = measured(lambda: tracer.run(sc, dtype=dtype, lazy=False), warm)
    every = measured(lambda: read_all(tracer.run(sc, dtype=dtype, lazy=False)), warm)
    trace = tracer.run(sc, dtype=dtype, lazy=False)
    np.save(folder / f"trace-{dtype}-in.npy", trace.rows("norm_in"))
    np.save(folder / f"trace-{dtype}-out.npy", trace.rows("out"))
    return {**out, "scenario": scenario_seconds, "every": every}


def probe_round_robin(folder: Path) -> dict:
    """In one process, turn about (bench.measure.round_robin: the same load for each): transformers'
    forward of the layer and attnsim's trace in float32 and float64; median seconds of each."""
    import torch
    import transformers
    import tracer
    from .measure import round_robin
    model = transformers.Qwen3_5ForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    mixer, x = model.model.layers[LAYER].linear_attn, torch.from_numpy(stream(model.config.hidden_size))[None]
    sc = tracer.from_model(folder, TEXT, LAYER)

    def theirs():
        with torch.no_grad():
            return mixer(x)
    calls = {"transformers": theirs, **{dtype: (lambda dtype=dtype: tracer.run(sc, dtype=dtype, lazy=False))
                                        for dtype in ("float32", "float64")}}
    return round_robin(calls, REPS)


def probe_attnsim(folder: Path, keep: str) -> dict:
    """keep: "all" (every state and the implicit weights), "implicit" (no states), "o" (outputs only),
    or "kernel" (the recurrence alone, everything kept, its inputs ready)."""
    from tracer.mechanisms.linear.heads import all_heads
    from tracer.models import hybrid_tensors
    from tracer.models.config import config_json
    from tracer.models.hybrid_config import hybrid_of
    from tracer.models.hybrid_linear import linear_layer
    from tracer.models.weights import Tensors
    cfg = hybrid_of(config_json(folder))
    w = {key: None if a is None else np.ascontiguousarray(a, dtype=np.float32)
         for key, a in hybrid_tensors.linear_mixer(Tensors(folder), cfg, LAYER).items()}
    h = stream(cfg.d_model)
    flags = dict(states=keep in ("all", "kernel"), implicit=keep != "o")
    warm = lambda: linear_layer(stream(cfg.d_model, 8), w, cfg)  # noqa: E731
    if keep == "kernel":
        p = linear_layer(h, w, cfg, states=False, implicit=False)
        args = (np.ascontiguousarray(p["q"] / np.float32(np.sqrt(cfg.d_k))), p["k"], p["v"], p["decay"], p["beta"])
        return measured(lambda: all_heads(*args, "delta", compiled=True), warm)
    out = measured(lambda: linear_layer(h, w, cfg, **flags), warm)
    np.save(folder / f"attnsim-{keep}.npy", linear_layer(h, w, cfg, states=False, implicit=False)["out"])
    return out


def probe_transformers(folder: Path) -> dict:
    import torch
    import transformers
    model = transformers.Qwen3_5ForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    mixer = model.model.layers[LAYER].linear_attn

    def call(tokens: int = TOKENS):
        with torch.no_grad():
            return mixer(torch.from_numpy(stream(model.config.hidden_size, tokens))[None])
    out = measured(call, lambda: call(8))
    np.save(folder / "transformers.npy", call()[0].numpy())
    return {**out, "threads": torch.get_num_threads()}


def trace_against_transformers(folder: Path) -> dict:
    """Each trace's `out` against transformers' forward of the same layer on the trace's own normed
    input: the largest difference as a share of the largest value, by dtype."""
    import torch
    import transformers
    model = transformers.Qwen3_5ForCausalLM.from_pretrained(folder, dtype=torch.float64).eval()
    mixer, got = model.model.layers[LAYER].linear_attn, {}
    for dtype in ("float32", "float64"):
        h = np.load(folder / f"trace-{dtype}-in.npy", allow_pickle=False).astype(np.float64)
        with torch.no_grad():
            want = mixer(torch.from_numpy(h)[None])[0].numpy()
        ours = np.load(folder / f"trace-{dtype}-out.npy", allow_pickle=False)
        got[dtype] = float(np.abs(ours - want).max() / np.abs(want).max())
    return got


def footprint_lines() -> list[str]:
    from tracer.mechanisms.linear.footprint import footprint, kv_per_token
    c = TEXT_CONFIG
    f = footprint(c["linear_num_value_heads"], c["linear_key_head_dim"], c["linear_value_head_dim"],
                  kv_per_token(c["num_key_value_heads"], c["head_dim"]))
    kept = c["linear_num_value_heads"] * TOKENS * c["linear_key_head_dim"] * c["linear_value_head_dim"]
    return [f"what a layer keeps while generating (bfloat16): {f.sentence(TOKENS)}; in bytes a linear layer "
            f"{2 * f.state / 2**20:.2f} MiB, a softmax layer {2 * f.cache(TOKENS) / 2**20:.2f} MiB at {TOKENS} tokens",
            f"the trace's states, every token's (float32): {4 * kept / 2**30:.2f} GiB for the layer"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.linear", description=__doc__.split("\n")[0])
    p.add_argument("--probe", nargs="+", metavar="ARG", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.probe:
        contender, folder, *keep = args.probe
        got = probe_attnsim(Path(folder), keep[0]) if contender == "attnsim" else \
            probe_trace(Path(folder), keep[0]) if contender == "trace" else \
            probe_round_robin(Path(folder)) if contender == "round_robin" else probe_transformers(Path(folder))
        print(json.dumps(got))
        return 0
    with tempfile.TemporaryDirectory(prefix="attnsim-bench-linear-") as tmp:
        print("bench.linear: writing a Qwen3.5-0.8B-shape checkpoint …", file=sys.stderr, flush=True)
        write_checkpoint(Path(tmp))
        theirs = fresh_probe("bench.linear", "transformers", tmp)
        traces = {dtype: fresh_probe("bench.linear", "trace", tmp, dtype) for dtype in ("float32", "float64")}
        ours = {keep: fresh_probe("bench.linear", "attnsim", tmp, keep) for keep in ("all", "implicit", "o", "kernel")}
        a = np.load(Path(tmp) / "attnsim-o.npy", allow_pickle=False)
        b = np.load(Path(tmp) / "transformers.npy", allow_pickle=False)
        differ = float(np.abs(a - b).max() / np.abs(b).max())
        trace_differ = trace_against_transformers(Path(tmp))
        turns = fresh_probe("bench.linear", "round_robin", tmp)
    base = theirs["seconds"]
    print(f"Qwen3.5-0.8B shapes, one linear layer, {TOKENS} tokens, float32 (load average {os.getloadavg()[0]:.2f}, "
          f"torch threads {theirs['threads']}; each in a fresh process, best of {REPS}):")
    print(f"  transformers' forward of the layer: {base:.3f} s, peak {theirs['peak'] / 2**20:.0f} MiB")
    for dtype, got in traces.items():
        every = got["every"]
        print(f"  attnsim's trace (tracer.from_model, then tracer.run(..., dtype=\"{dtype}\", lazy=False): every step, "
              f"each head's states and implied weights when first read): {got['seconds']:.3f} s "
              f"({got['seconds'] / base:.2f}× transformers'), peak {got['peak'] / 2**20:.0f} MiB; then every step read "
              f"too: {every['seconds']:.3f} s ({every['seconds'] / base:.2f}×), peak {every['peak'] / 2**20:.0f} MiB; "
              f"from_model {got['scenario']:.3f} s; its out differs from transformers' forward on its normed input "
              f"by {trace_differ[dtype]:.1e} of the largest value")
    print(f"  in one process, taking turns (median of {REPS}): transformers' forward {turns['transformers']:.3f} s; "
          + "; ".join(f"attnsim's trace in {dtype} {turns[dtype]:.3f} s ({turns[dtype] / turns['transformers']:.2f}×)"
                      for dtype in ("float32", "float64")))
    words = {"all": "the layer, every state and the implicit weights kept",
             "implicit": "the layer, the implicit weights kept, no states", "o": "the layer, outputs only",
             "kernel": "the kernel alone (states, o, implicit; inputs ready)"}
    for keep, got in ours.items():
        print(f"  attnsim, {words[keep]}: {got['seconds']:.3f} s ({got['seconds'] / base:.2f}× transformers'), "
              f"peak {got['peak'] / 2**20:.0f} MiB")
    print(f"  goal: the trace ≤ 0.5× transformers' time; the outputs differ by {differ:.1e} of their largest value")
    for line in footprint_lines():
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
