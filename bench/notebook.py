"""Notebooks, timed (issue 22): a trace's `_repr_html_` for by_hand (goal ≤ 50 ms) and gpt2_small
(goal ≤ 1 s and ≤ 8 MB), and `tracer.from_transformers` on a GPT-2-small-shaped model (random
weights, made here) against `tracer.from_model` on the same weights saved to a folder (goal ≤ 1.5×),
measured in the same run, interleaved.

    python -m bench.notebook
    python -m bench.notebook --layer 5 --reps 3
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from .measure import round_robin

GOALS = {"by_hand": 0.050, "gpt2_small": 1.0, "gpt2_small_mb": 8.0, "ratio": 1.5}
TEXT = "The cat sat on the mat because it was tired, and the dog lay by the door waiting for its walk."


def html_times(reps: int) -> dict:
    """Median seconds of `_repr_html_` on computed traces, and the HTML's size in MB."""
    import tracer
    out = {}
    for name, arithmetic in (("by_hand", "by-hand"), ("gpt2_small", None)):
        trace = tracer.run(name, arithmetic=arithmetic).compute_all()
        out[name] = round_robin({name: trace._repr_html_}, reps if name == "by_hand" else max(3, reps // 4))[name]
        out[name + "_mb"] = len(trace._repr_html_().encode("utf-8")) / 1e6
    return out


def gpt2_small_model():
    """A GPT-2-small-shaped model (12 layers, d_model 768, 12 heads, 50 257 tokens), random
    weights, float32 as published; and a byte-level tokenizer trained here on a few sentences
    (its first token stands for the end of text)."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(bos_token_id=0, eos_token_id=0)).eval()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([TEXT] * 4, trainers.BpeTrainer(vocab_size=300,
                                                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return model, transformers.PreTrainedTokenizerFast(tokenizer_object=tok)


def loader_times(layer: int, reps: int) -> dict:
    """Median seconds of from_transformers (the model in memory) and from_model (its folder)."""
    import tracer
    model, tokenizer = gpt2_small_model()
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)
        calls = {"from_transformers": lambda: tracer.from_transformers(model, tokenizer, TEXT, layer),
                 "from_model": lambda: tracer.from_model(Path(folder), TEXT, layer)}
        times = round_robin(calls, reps)
    times["ratio"] = times["from_transformers"] / times["from_model"]
    return times


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.notebook", description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=20, help="timed runs of by_hand's HTML (the rest take fewer)")
    p.add_argument("--layer", type=int, default=11, help="the layer loaded (11: every block runs before it)")
    args = p.parse_args(argv)
    html = html_times(args.reps)
    loads = loader_times(args.layer, max(3, args.reps // 5))
    rows = [("`_repr_html_` by_hand", f"{html['by_hand'] * 1e3:.1f} ms", f"≤ {GOALS['by_hand'] * 1e3:.0f} ms",
             html["by_hand"] <= GOALS["by_hand"]),
            ("`_repr_html_` by_hand, size", f"{html['by_hand_mb'] * 1e3:.0f} kB", "", True),
            ("`_repr_html_` gpt2_small", f"{html['gpt2_small'] * 1e3:.0f} ms", f"≤ {GOALS['gpt2_small']:.0f} s",
             html["gpt2_small"] <= GOALS["gpt2_small"]),
            ("`_repr_html_` gpt2_small, size", f"{html['gpt2_small_mb']:.2f} MB", f"≤ {GOALS['gpt2_small_mb']:.0f} MB",
             html["gpt2_small_mb"] <= GOALS["gpt2_small_mb"]),
            (f"from_transformers, GPT-2 small, layer {args.layer}", f"{loads['from_transformers']:.2f} s", "", True),
            (f"from_model, same weights in a folder, layer {args.layer}", f"{loads['from_model']:.2f} s", "", True),
            ("from_transformers ÷ from_model", f"{loads['ratio']:.2f}×", f"≤ {GOALS['ratio']}×",
             loads["ratio"] <= GOALS["ratio"])]
    print("| measure | median | goal | met |\n| --- | --- | --- | --- |")
    for name, value, goal, met in rows:
        print(f"| {name} | {value} | {goal} | {'yes' if met else 'NO'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
