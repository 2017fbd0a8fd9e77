"""`python -m bench.llama`: a checkpoint with Llama-3.2-1B's shapes (16 layers, d_model 2048, 32
query heads over 8 key/value heads of 64, MLP 8192, vocabulary 128 256, bfloat16, llama3 rope
scaling) and random weights, written once to a cache folder (about 2.5 GB; never in the
repository), traced at its last layer on 256 tokens, against transformers loading the same folder
and running one forward with output_attentions. Each run is a fresh process, timed after its
imports; peak memory is the growth of the resident set. attnsim is also run at layer 0, so that
the cost of one block (the difference, over 15) can be scaled to Llama-3.1-8B's last layer.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from pathlib import Path

import numpy as np

from .measure import fresh_probe, probed

TOKENS = 256
TEXT = " ".join(f"w{i % 50}" for i in range(TOKENS))   # one word-level token per word
LLAMA_1B = dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                num_key_value_heads=8, head_dim=64, vocab_size=128256, max_position_embeddings=131072,
                rms_norm_eps=1e-5, hidden_act="silu", tie_word_embeddings=True,
                rope_scaling=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                  original_max_position_embeddings=8192),
                rope_theta=500000.0, model_type="llama", architectures=["LlamaForCausalLM"],
                torch_dtype="bfloat16", bos_token_id=50, eos_token_id=50)
# Llama-3.1-8B: parameters in one block, against the 1B's (for the estimate of its last layer)
BLOCK_8B = 4096 * (4096 * 2 + 1024 * 2) + 3 * 4096 * 14336 + 2 * 4096
LAYERS_8B = 32


def cache_folder() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(root) / "attnsim-bench" / "llama-3.2-1b-shape"


def tensors(c: dict) -> list[tuple[str, tuple[int, ...]]]:
    d, f, hd = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    out = [("model.embed_tokens.weight", (c["vocab_size"], d)), ("model.norm.weight", (d,))]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", (d,)), (p + "post_attention_layernorm.weight", (d,)),
                (p + "self_attn.q_proj.weight", (q, d)), (p + "self_attn.k_proj.weight", (kv, d)),
                (p + "self_attn.v_proj.weight", (kv, d)), (p + "self_attn.o_proj.weight", (d, q)),
                (p + "mlp.gate_proj.weight", (f, d)), (p + "mlp.up_proj.weight", (f, d)),
                (p + "mlp.down_proj.weight", (d, f))]
    return out


def write_checkpoint(folder: Path) -> None:
    """The safetensors file written tensor by tensor (bfloat16: the top 16 bits of float32 draws,
    N(0, 0.02²); norm gains 1), then config.json and a word-level tokenizer of 50 words; a marker
    file last, so that an interrupted write is redone."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    folder.mkdir(parents=True, exist_ok=True)
    names, offset, header = tensors(LLAMA_1B), 0, {"__metadata__": {"format": "pt"}}
    for name, shape in names:
        size = 2 * math.prod(shape)
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    rng = np.random.default_rng(0)
    with open(folder / "model.safetensors", "wb") as f:
        f.write(len(raw).to_bytes(8, "little") + raw)
        for name, shape in names:
            for rows in np.array_split(np.arange(shape[0]), max(1, math.prod(shape) // 2**24)):
                block = (np.ones((len(rows),) + shape[1:], np.float32) if len(shape) == 1 else
                         rng.standard_normal((len(rows),) + shape[1:], dtype=np.float32) * np.float32(0.02))
                f.write((block.view(np.uint32) >> 16).astype("<u2").tobytes())
    (folder / "config.json").write_text(json.dumps(LLAMA_1B, indent=1))
    tok = Tokenizer(models.WordLevel({f"w{i}": i for i in range(50)} | {"<unk>": 51}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(folder / "tokenizer.json"))
    (folder / "complete").write_text("1")


def bytes_read(folder: Path, layer: int) -> int:
    """Bytes of the tensors attnsim reads for `layer`: the text's embedding rows, blocks before it
    whole, and its own norm and attention (tracer.models.blocks.shapes says which)."""
    from tracer.models.blocks import shapes
    from tracer.models.config import read_config
    cfg = read_config(folder)
    total = TOKENS * cfg.d_model * 2
    for i in range(layer + 1):
        want = shapes(cfg, "model.", i, mlp=i < layer)
        total += sum(2 * math.prod(s) for name, s in want.items() if not name.endswith(".bias"))
    return total


def _attnsim(folder: str, layer: int):
    import tracer
    from tracer.models import layer_arrays
    trace = tracer.run(tracer.from_arrays(**layer_arrays(folder, TEXT, layer)))
    return [trace[s.id] for s in trace.steps]      # every step computed, whatever the trace's policy


def _transformers(folder: str, layer: int):
    import torch
    import transformers
    from tokenizers import Tokenizer
    ids = Tokenizer.from_file(os.path.join(folder, "tokenizer.json")).encode(TEXT).ids
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager")
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True)
    return out, str(model.dtype)


def probe(contender: str, folder: str, layer: int) -> None:
    """One run in this (fresh) process: prints its seconds and peak bytes."""
    got, seconds, peak = probed(contender, _attnsim, _transformers, folder, layer)
    dtype = got[1] if contender == "transformers" else "float64"
    print(json.dumps({"seconds": seconds, "peak": peak, "dtype": dtype}))


def _run(contender: str, folder: Path, layer: int) -> dict:
    return fresh_probe("bench.llama", contender, str(folder), str(layer))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.llama", description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=1, help="fresh runs of each contender, alternating")
    p.add_argument("--folder", type=Path, default=None, help="where the checkpoint is kept (default: a cache folder)")
    p.add_argument("--probe", nargs=3, metavar=("CONTENDER", "FOLDER", "LAYER"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.probe:
        probe(args.probe[0], args.probe[1], int(args.probe[2]))
        return 0
    folder = args.folder or cache_folder()
    if not (folder / "complete").is_file():
        print(f"bench.llama: writing a Llama-3.2-1B-shape checkpoint to {folder} …", file=sys.stderr, flush=True)
        write_checkpoint(folder)
    last = LLAMA_1B["num_hidden_layers"] - 1
    runs = {"attnsim": [], "transformers": [], "attnsim layer 0": []}
    for _ in range(args.reps):
        runs["attnsim"].append(_run("attnsim", folder, last))
        runs["transformers"].append(_run("transformers", folder, last))
        runs["attnsim layer 0"].append(_run("attnsim", folder, 0))
    t = {c: statistics.median(r["seconds"] for r in runs[c]) for c in runs}
    m = {c: statistics.median(r["peak"] for r in runs[c]) for c in runs}
    read, gb = bytes_read(folder, last), (lambda b: f"{b / 2**30:.2f} GiB")  # noqa: E731
    block = (t["attnsim"] - t["attnsim layer 0"]) / last
    per = sum(math.prod(shape) for name, shape in tensors(LLAMA_1B) if ".layers.0." in name)   # one 1B block
    eight = t["attnsim layer 0"] + (LAYERS_8B - 1) * block * BLOCK_8B / per
    print(f"Llama-3.2-1B shapes (random bfloat16 weights), layer {last}, {TOKENS} tokens; median of {args.reps} "
          f"fresh run(s) each; load average {os.getloadavg()[0]:.2f}\n")
    print("| contender | seconds | peak memory | peak ÷ tensors attnsim reads |\n| --- | --- | --- | --- |")
    print(f"| attnsim: load + trace of layer {last} | {t['attnsim']:.1f} | {gb(m['attnsim'])} | {m['attnsim'] / read:.2f} |")
    print(f"| transformers ({runs['transformers'][0]['dtype']}): load + forward with attentions | "
          f"{t['transformers']:.1f} | {gb(m['transformers'])} | {m['transformers'] / read:.2f} |")
    print(f"| attnsim: layer 0 | {t['attnsim layer 0']:.1f} | {gb(m['attnsim layer 0'])} | |")
    print(f"\nattnsim ÷ transformers time: {t['attnsim'] / t['transformers']:.2f}; tensors attnsim reads: {gb(read)}; "
          f"one block: {block:.2f} s; Llama-3.1-8B's last layer (31 blocks of {BLOCK_8B / per:.2f}× the "
          f"parameters): about {eight:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
