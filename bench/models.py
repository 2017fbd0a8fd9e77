"""`python -m bench.models`: a GPT-2-small-size checkpoint (124M parameters, random weights written
by this script to a temporary folder), layer 5 on 64 tokens: attnsim loading and tracing the layer
against transformers loading the same folder and running its forward with attentions. Each run is
a fresh process (nothing cached in memory but the OS's file cache, which both share), timed after
its imports; peak memory is the growth of the resident set during the run.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile

from .measure import fresh_probe, probed

LAYER, TOKENS = 5, 64
TEXT = " ".join(f"w{i % 50}" for i in range(TOKENS))   # one word-level token per word
CONTENDERS = ("attnsim", "transformers")


def write_checkpoint(folder: str) -> None:
    """GPT-2 small's shape (d_model 768, 12 layers of 12 heads, 1024 positions, 50257 tokens) with
    transformers' random initial weights, and a word-level tokenizer of 50 words."""
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config())
    model.save_pretrained(folder, safe_serialization=True)
    tok = Tokenizer(models.WordLevel({f"w{i}": i for i in range(50)} | {"<unk>": 50}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(os.path.join(folder, "tokenizer.json"))


def bytes_read(folder: str) -> int:
    """Bytes of the tensors attnsim reads: blocks 0 … LAYER−1 whole, block LAYER's norm and
    attention, and TOKENS rows of the token and position embeddings."""
    from safetensors import safe_open
    total = 0
    with safe_open(os.path.join(folder, "model.safetensors"), framework="numpy") as f:
        for name in f.keys():
            shape, size = f.get_slice(name).get_shape(), 4   # float32
            parts = name.split(".")
            if name.endswith(("wte.weight", "wpe.weight")):
                total += TOKENS * shape[1] * size
            elif "h" in parts:
                block = int(parts[parts.index("h") + 1])
                if block < LAYER or (block == LAYER and ".mlp." not in name and ".ln_2." not in name):
                    total += size * math.prod(shape)
    return total


def _attnsim(folder: str):
    import tracer
    from tracer.models import layer_arrays
    trace = tracer.run(tracer.from_arrays(**layer_arrays(folder, TEXT, LAYER)))
    return [trace[s.id] for s in trace.steps]      # every step computed, whatever the trace's policy


def _transformers(folder: str):
    import torch
    import transformers
    from tokenizers import Tokenizer
    ids = Tokenizer.from_file(os.path.join(folder, "tokenizer.json")).encode(TEXT).ids
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager")
    with torch.no_grad():
        return model(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)


def probe(contender: str, folder: str) -> None:
    """One run in this (fresh) process: prints its seconds and peak bytes."""
    _, seconds, peak = probed(contender, _attnsim, _transformers, folder)
    print(json.dumps({"seconds": seconds, "peak": peak}))


def _run(contender: str, folder: str) -> dict:
    return fresh_probe("bench.models", contender, folder)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.models", description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=3, help="fresh runs of each contender, alternating")
    p.add_argument("--probe", nargs=2, metavar=("CONTENDER", "FOLDER"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.probe:
        probe(*args.probe)
        return 0
    with tempfile.TemporaryDirectory(prefix="attnsim-bench-") as folder:
        print("bench.models: writing a GPT-2-small-size checkpoint …", file=sys.stderr, flush=True)
        write_checkpoint(folder)
        read = bytes_read(folder)
        size = os.path.getsize(os.path.join(folder, "model.safetensors"))
        runs = {c: [] for c in CONTENDERS}
        for _ in range(args.reps):
            for c in CONTENDERS:
                runs[c].append(_run(c, folder))
    t = {c: statistics.median(r["seconds"] for r in runs[c]) for c in CONTENDERS}
    m = {c: statistics.median(r["peak"] for r in runs[c]) for c in CONTENDERS}
    mb = lambda b: f"{b / 2**20:.0f} MiB"  # noqa: E731
    print(f"GPT-2 small size (random weights, {mb(size)} of float32), layer {LAYER}, {TOKENS} tokens; "
          f"median of {args.reps} fresh runs each\n")
    print("| contender | seconds | peak memory | peak ÷ tensors read |\n| --- | --- | --- | --- |")
    print(f"| attnsim: load + trace | {t['attnsim']:.2f} | {mb(m['attnsim'])} | {m['attnsim'] / read:.2f} |")
    print(f"| transformers: load + forward with attentions | {t['transformers']:.2f} | {mb(m['transformers'])} "
          f"| {m['transformers'] / read:.2f} |")
    print(f"\nattnsim ÷ transformers time: {t['attnsim'] / t['transformers']:.2f}; tensors read by attnsim: "
          f"{mb(read)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
