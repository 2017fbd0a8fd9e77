"""`python -m bench.gpt_oss`: gpt-oss's MXFP4 experts. (1) Dequantization throughput: one layer's
worth of expert matrices dequantized as attnsim reads them, against reading the same number of
weights stored as bfloat16, in the same run. (2) A checkpoint with gpt-oss-20b's shapes (24 layers,
d_model 2880, 64 query heads over 8 key/value heads of 64, 32 experts of 2880, vocabulary 201 088,
experts MXFP4, the rest bfloat16, random), written once to a cache folder (about 12 GB; never in
the repository), traced at layer 1 on 128 tokens in a fresh process: seconds and peak memory (the
growth of the resident set) against the bytes of the tensors attnsim reads.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .measure import fresh_probe

TOKENS = 128
LAYER = 1
TEXT = " ".join(f"w{i % 50}" for i in range(TOKENS))   # one word-level token per word
D, INNER, EXPERTS, HEADS, GROUPS, HD, VOCAB, LAYERS = 2880, 2880, 32, 64, 8, 64, 201088, 24
CONFIG = dict(model_type="gpt_oss", architectures=["GptOssForCausalLM"], hidden_size=D, intermediate_size=INNER,
              num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=GROUPS, head_dim=HD,
              num_local_experts=EXPERTS, num_experts_per_tok=4, vocab_size=VOCAB, max_position_embeddings=131072,
              rms_norm_eps=1e-5, hidden_act="silu", sliding_window=128, swiglu_limit=7.0, attention_bias=True,
              layer_types=["sliding_attention", "full_attention"] * (LAYERS // 2), tie_word_embeddings=False,
              rope_theta=150000.0, rope_scaling=dict(rope_type="yarn", factor=32.0, beta_fast=32.0, beta_slow=1.0,
                                                     original_max_position_embeddings=4096, truncate=False),
              quantization_config=dict(quant_method="mxfp4"), bos_token_id=50, eos_token_id=50)


def cache_folder() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(root) / "attnsim-bench" / "gpt-oss-20b-shape"


def layer_tensors(i: int) -> list[tuple[str, str, tuple]]:
    """(name, dtype, shape) of block i as gpt-oss-20b publishes it."""
    p, q, kv = f"model.layers.{i}.", HEADS * HD, GROUPS * HD
    out = [(p + "input_layernorm.weight", "BF16", (D,)), (p + "post_attention_layernorm.weight", "BF16", (D,)),
           (p + "self_attn.sinks", "BF16", (HEADS,))]
    for name, rows, cols in (("q_proj", q, D), ("k_proj", kv, D), ("v_proj", kv, D), ("o_proj", D, q)):
        out += [(p + f"self_attn.{name}.weight", "BF16", (rows, cols)), (p + f"self_attn.{name}.bias", "BF16", (rows,))]
    x = p + "mlp.experts."
    out += [(p + "mlp.router.weight", "BF16", (EXPERTS, D)), (p + "mlp.router.bias", "BF16", (EXPERTS,)),
            (x + "gate_up_proj_blocks", "U8", (EXPERTS, 2 * INNER, D // 32, 16)),
            (x + "gate_up_proj_scales", "U8", (EXPERTS, 2 * INNER, D // 32)),
            (x + "gate_up_proj_bias", "BF16", (EXPERTS, 2 * INNER)),
            (x + "down_proj_blocks", "U8", (EXPERTS, D, INNER // 32, 16)),
            (x + "down_proj_scales", "U8", (EXPERTS, D, INNER // 32)), (x + "down_proj_bias", "BF16", (EXPERTS, D))]
    return out


def _values(name: str, dtype: str, shape: tuple, rng) -> bytes:
    """Random bytes of a tensor: norm gains 1; bfloat16 N(0, σ²) (σ 0.02, or 1 for sinks); MXFP4
    codes uniform with exponents 2^-9 … 2^-6, so that the stream stays in range."""
    count = math.prod(shape)
    if dtype == "U8":
        if name.endswith("_scales"):
            return rng.integers(118, 122, count, dtype=np.uint8).tobytes()
        return rng.integers(0, 256, count, dtype=np.uint8).tobytes()
    sigma = 1.0 if name.endswith("sinks") else 0.02
    draw = np.ones(count, np.float32) if "layernorm" in name or name.endswith("norm.weight") else \
        rng.standard_normal(count, dtype=np.float32) * np.float32(sigma)
    return (draw.view(np.uint32) >> 16).astype("<u2").tobytes()


def write_shard(path: Path, tensors: list, rng) -> None:
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, dtype, shape in tensors:
        size = math.prod(shape) * (1 if dtype == "U8" else 2)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little") + raw)
        for name, dtype, shape in tensors:
            f.write(_values(name, dtype, shape, rng))


def write_checkpoint(folder: Path) -> None:
    """One shard per block plus one for the embeddings and final norm, every layer written in full
    (the loader opens every shard's header); a marker file last, so an interrupted write is redone."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    folder.mkdir(parents=True, exist_ok=True)
    rng, index = np.random.default_rng(0), {}
    shards = [("model-embed.safetensors", [("model.embed_tokens.weight", "BF16", (VOCAB, D)),
                                           ("model.norm.weight", "BF16", (D,))])]
    shards += [(f"model-layer{i:02d}.safetensors", layer_tensors(i)) for i in range(LAYERS)]
    for file, tensors in shards:
        write_shard(folder / file, tensors, rng)
        index.update({name: file for name, _, _ in tensors})
        print(f"  {file}", file=sys.stderr, flush=True)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": index}))
    (folder / "config.json").write_text(json.dumps(CONFIG, indent=1))
    tok = Tokenizer(models.WordLevel({f"w{i}": i for i in range(50)} | {"<unk>": 51}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(folder / "tokenizer.json"))
    (folder / "complete").write_text("1")


def bytes_read() -> int:
    """The tensors attnsim reads at layer 1: the text's embedding rows, block 0 whole (every expert:
    128 tokens choosing 4 of 32 reach them all), block 1's norm and attention."""
    total = TOKENS * D * 2
    for i in range(LAYER + 1):
        for name, dtype, shape in layer_tensors(i):
            if i == LAYER and (".mlp." in name or "post_attention" in name):
                continue
            total += math.prod(shape) * (1 if dtype == "U8" else 2)
    return total


def throughput(experts: int = 4) -> tuple[float, float]:
    """(GB/s of float32-equivalent weights out of MXFP4 dequantization, the same read from
    bfloat16), over `experts` experts' gate_up and down matrices, each read from its own folder."""
    from tracer.models.mxfp4 import dequantize
    from tracer.models.weights import Tensors
    dequantize(np.zeros((1, 1, 16), np.uint8), np.zeros((1, 1), np.uint8))   # the kernel loaded (compiled once)
    rng = np.random.default_rng(1)
    mx = [(n, d, (experts,) + s[1:]) for n, d, s in layer_tensors(0) if "experts." in n and "bias" not in n]
    bf = [(f"e.{w}", "BF16", (experts, D, cols)) for w, cols in (("gate_up_proj", 2 * INNER), ("down_proj", INNER))]
    names = (("model.layers.0.mlp.experts.gate_up_proj", "model.layers.0.mlp.experts.down_proj"),
             ("e.gate_up_proj", "e.down_proj"))
    weights, out = experts * 3 * D * INNER, []
    with tempfile.TemporaryDirectory() as tmp:
        for kind, tensors, read in (("mx", mx, names[0]), ("bf", bf, names[1])):
            (Path(tmp) / kind).mkdir()
            write_shard(Path(tmp) / kind / "model.safetensors", tensors, rng)
            t = Tensors(Path(tmp) / kind)
            start = time.perf_counter()
            for e in range(experts):
                for name in read:
                    t.expert(name, e)
            out.append(4 * weights / (time.perf_counter() - start) / 1e9)
    return out[0], out[1]


def probe(folder: str) -> None:
    """One trace in this (fresh) process: prints its seconds and peak bytes."""
    from .__main__ import _warm
    from .measure import _status
    _warm("float64")
    import tracer
    from tracer.models import layer_arrays
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = _status("VmRSS")
    start = time.perf_counter()
    trace = tracer.run(tracer.from_arrays(**layer_arrays(folder, TEXT, LAYER)))
    arrays = [trace[s.id] for s in trace.steps]
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "peak": _status("VmHWM") - base, "steps": len(arrays)}))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.gpt_oss", description=__doc__.split("\n")[0])
    p.add_argument("--folder", type=Path, default=None, help="where the checkpoint is kept (default: a cache folder)")
    p.add_argument("--probe", metavar="FOLDER", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.probe:
        probe(args.probe)
        return 0
    mx, bf = throughput()
    print(f"MXFP4 dequantization: {mx:.2f} GB/s of float32-equivalent weights; bfloat16 read: {bf:.2f} GB/s "
          f"(ratio {mx / bf:.2f}; both widened to float64 as attnsim keeps them)")
    folder = args.folder or cache_folder()
    if not (folder / "complete").is_file():
        print(f"bench.gpt_oss: writing a gpt-oss-20b-shape checkpoint to {folder} …", file=sys.stderr, flush=True)
        write_checkpoint(folder)
    got = fresh_probe("bench.gpt_oss", str(folder))
    read = bytes_read()
    print(f"gpt-oss-20b shapes, layer {LAYER}, {TOKENS} tokens: {got['seconds']:.1f} s, peak {got['peak'] / 2**30:.2f} GiB; "
          f"tensors attnsim reads {read / 2**30:.2f} GiB; peak ÷ read {got['peak'] / read:.2f} (goal ≤ 1.5); "
          f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
