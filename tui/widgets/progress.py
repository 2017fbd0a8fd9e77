"""Where a step sits in a computation that unfolds: under the online softmax, the head's score grid
with the current key block lit (later blocks faint, not computed yet) and each query's running max
and sums beside it; under KV-cache decoding, the token timeline and how large the cache has grown."""
from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from tracer.ids import parse, step_id
from tracer.printing import fmt, fractions_for, tolerance

ROWS, COLS = 10, 16   # queries and keys drawn at most (the matrix view shows the rest)


def block_grid(trace, step) -> Table | None:
    """The head's scores as the blocks up to this one made them, this block lit, later ones faint."""
    ref = parse(step.id)
    if ref.block is None or ref.head is None:
        return None
    block, h = trace.arithmetic.block, ref.head
    n, m = trace.scenario.n, trace.scenario.m
    f = lambda v: fmt(v, fractions_for(trace), tol=tolerance(trace.dtype))  # noqa: E731
    keys = trace.scenario.key_tokens
    grid = Table(title=f"h{h} scores, key block {ref.block} lit (keys {ref.block * block + 1}–"
                       f"{min(m, (ref.block + 1) * block)} of {m}); faint: not computed yet",
                 box=None, padding=(0, 1), title_justify="left")
    grid.add_column("query\\key")
    for c in range(min(m, COLS)):
        grid.add_column(keys[c], justify="right", style="bold reverse" if c // block == ref.block else "")
    grid.add_column("max", justify="right", style="cyan")
    grid.add_column("sums", justify="right", style="cyan")
    top = trace.rows(step_id("max", h, block=ref.block))
    sums = trace.rows(step_id("sums", h, block=ref.block))
    for i in range(min(n, ROWS)):
        cells = []
        for c in range(min(m, COLS)):
            j = c // block
            if j > ref.block:
                cells.append(Text("·", style="dim"))
            else:
                cells.append(f(trace.rows(step_id("scores", h, block=j))[i, c - j * block]))
        grid.add_row(trace.scenario.tokens[i], *cells, f(top[i, 0]), f(sums[i, 0]))
    return grid


def timeline(trace, step) -> Text | None:
    """The tokens in order: the prompt, the decoded ones, this one lit; the cache's size."""
    ref = parse(step.id)
    if trace.scenario.decode is None or (ref.token is None and not ref.prefill):
        return None
    p, tokens = trace.scenario.decode, trace.scenario.tokens
    out = Text("tokens: ")
    for i, name in enumerate(tokens):
        lit = (ref.prefill and i < p) or ref.token == i
        style = "bold reverse" if lit else ("dim" if ref.token is None or i > ref.token else "")
        out.append(name, style=style)
        out.append(" | " if i == p - 1 else " ")
    m = trace.scenario.mla
    if m is not None:   # latent attention: the cache is c_kv and k_pe, said in numbers
        rows = p if ref.prefill else ref.token + 1
        size = (f"{rows} rows of {m['rank']} + {m['rope']} = {rows * (m['rank'] + m['rope'])} numbers (multi-head "
                f"attention's keys and values: {rows * 2 * trace.scenario.heads * trace.scenario.d_v})")
        what = (f"prefill: the prompt's {p} tokens at once; their c_kv and k_pe start the cache" if ref.prefill else
                f"token {ref.token} ({tokens[ref.token]}) alone: its c_kv and k_pe appended")
        out.append(f"\n{what}; the cache holds {size}")
    elif ref.prefill:
        out.append(f"\nprefill: the prompt's {p} tokens at once (a causal trace); their keys and values "
                   "start the cache")
    else:
        t = ref.token
        out.append(f"\ntoken {t} ({tokens[t]}) alone: its key and value appended, the cache has {t + 1} rows "
                   f"(was {t}); one new row of weights, 1 × {t + 1}")
    return out


class Progress(Static):
    """Hidden unless the step is a key block or a decoded token."""

    def show(self, trace, step) -> None:
        shown = block_grid(trace, step) or timeline(trace, step)
        self.display = shown is not None
        if shown is not None:
            self.update(shown)
