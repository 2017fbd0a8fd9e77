"""The model view as text (`attnsim model`): the whole model's cache beside multi-head
attention's, the best head of each role, then a row per layer and under it a row per head; the
lines fit in 80 columns."""
from __future__ import annotations

from .roles import ROLES

def size(count: int) -> str:
    """`8,704 bytes (8.5 KiB)`."""
    return f"{count:,} bytes" + (f" ({compact(count)})" if count >= 2**10 else "")


def compact(count: int) -> str:
    """`17 KiB`, `1.5 GiB`, `512 bytes`."""
    for unit, step in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= step:
            return f"{count / step:.3g} {unit}"
    return f"{count:,} bytes"


def header(view, width: int = 80) -> str:
    """What the model is and what it reads (as many of its tokens as fit), before the layers."""
    line = f"{view.name} ({view.model_type}): {view.layer_count} layers, {len(view.tokens)} tokens:"
    for n, token in enumerate(view.tokens):
        more = " …" if n + 1 < len(view.tokens) else ""
        if len(line) + 1 + len(token) + len(more) > width and n:
            return line + " …"
        line += " " + token
    return line


def footer(view) -> list[str]:
    """What the whole model keeps, and the best head of each role, after the layers."""
    ratio = view.cache_bytes / view.mha_cache_bytes if view.mha_cache_bytes else 1.0
    lines = [f"cache at {view.context:,} tokens ({view.dtype}): {size(view.cache_bytes)}",
             f"multi-head attention's: {size(view.mha_cache_bytes)}; this model keeps {ratio:.3f} × that"]
    if view.layers:
        best = [f"{role} L{layer} h{head} {score:.2f}" for role in ROLES for layer, head, score in view.best(role)]
        lines += ["best heads: " + " · ".join(best[:2]), " " * 12 + " · ".join(best[2:])]   # two a line: 80 columns
    return lines


def layer_block(row) -> list[str]:
    """A layer's line and its heads' rows, after a blank line."""
    return ["", layer_line(row), *head_lines(row)]


def layer_line(row) -> str:
    return f"layer {row.layer} · {row.kind} · heads {row.heads} q / {row.kv_heads} kv · keeps {row.memory.words()} ({row.cache})"


def _sigmas(values) -> str:
    return "—" if values is None else " ".join(f"{s:#.3g}" for s in values)


def head_lines(row) -> list[str]:
    names = f"{'head':>6}{'previous':>9}{'first':>7}{'duplicate':>10}{'induction':>10}"
    out = [f"{names}  {'qk σ₁ σ₂ σ₃':<18}ov σ₁ σ₂ σ₃"]
    for h in range(row.heads):
        s = [row.scores[role][h] for role in ROLES]
        qk = _sigmas(None if row.qk is None else row.qk[h])
        ov = _sigmas(None if row.ov is None else row.ov[h])
        out.append(f"{h:>6}{s[0]:>9.3f}{s[1]:>7.3f}{s[2]:>10.3f}{s[3]:>10.3f}  {qk:<18}{ov}")
    return out


def report(view) -> str:
    lines = [header(view)]
    for row in view.layers:
        lines += layer_block(row)
    return "\n".join(lines + [""] + footer(view))
