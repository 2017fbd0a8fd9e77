"""A trace as one piece of HTML for a notebook (Jupyter, VS Code, Colab): a step list to move
through, each step a `<details>` holding a labelled heatmap with its numbers (fractions under
by-hand), its title and formula, and each cell's story (`explain`) in its `title`, shown on hover.
HTML and CSS only: front ends strip scripts from output they do not trust.

A big trace stays small: the layer-wide steps and the first head(s) are drawn, each matrix up to
a corner of MAX_SIDE × MAX_SIDE, within a budget of cells; the rest is listed with how to see it.
"""
from __future__ import annotations

import html
import itertools

import numpy as np

from .figures.common import SEQUENTIAL, TITLE_WIDTH   # as the pictures draw them: ramps, a title's width
from .labels import LABEL_WIDTH, short, step_labels
from .printing import fractions_for, table_writer, tolerance

MAX_SIDE = 16          # rows and columns of one matrix drawn; the rest is said, not drawn
CELL_BUDGET = 4096     # cells drawn in all (each carries its explanation): ≈ 1 MB of HTML at most
# colour ramps as anchors (sequential: dark violet to yellow; diverging: blue, white, red)
RAMP = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b",
        "#fde725"]
DIVERGING = ["#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7", "#fddbc7", "#f4a582", "#d6604d", "#b2182b"]
MASKED = ("#d9d9d9", "#000000")   # a −∞ (masked) cell: background, ink
_ids = itertools.count()          # one prefix per rendering: two traces in one notebook never share ids

# Neutral colours (half-transparent greys) read on a light page and a dark one alike; the page's
# own text colour is inherited (a front end's dark theme need not set prefers-color-scheme), links
# take the front end's link colour where it names one (JupyterLab, VS Code); each cell carries its
# own background and ink.
STYLE = """
.attnsim{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:13px;line-height:1.4;color:inherit}
.attnsim .as-head{margin:0 0 6px}
.attnsim .as-note{opacity:.8;font-size:12px;margin:4px 0}
.attnsim nav{border:1px solid rgba(128,128,128,.45);border-radius:4px;padding:4px 8px;margin:4px 0 8px}
.attnsim nav a{margin-right:6px;white-space:nowrap}
.attnsim a{color:var(--jp-content-link-color,var(--vscode-textLink-foreground,inherit));text-decoration:underline;
 text-decoration-color:rgba(66,133,244,.9)}
.attnsim details{border:1px solid rgba(128,128,128,.45);border-radius:4px;margin:4px 0;padding:0 8px}
.attnsim summary{cursor:pointer;padding:4px 0}
.attnsim .as-f{font-family:ui-monospace,Menlo,Consolas,monospace;opacity:.85}
.attnsim .as-move{float:right;font-size:12px}
.attnsim table{font-size:inherit;border-collapse:collapse;margin:4px 0 6px;font-variant-numeric:tabular-nums}
.attnsim th{font-weight:normal;opacity:.85;padding:1px 6px;text-align:right;white-space:nowrap}
.attnsim td{padding:2px 6px;text-align:right;min-width:2.2em;border:1px solid rgba(128,128,128,.25)}
.attnsim td[title]{cursor:help}
.attnsim .as-wrap{overflow-x:auto}
@media (prefers-color-scheme:dark){.attnsim a{text-decoration-color:rgba(144,202,249,.9)}}
"""


def trace_html(trace) -> str:
    """The whole trace as HTML (see the module's docstring)."""
    uid = f"attnsim-{next(_ids)}"
    drawn = chosen_steps(trace)
    fractions, tol = fractions_for(trace), tolerance(trace.dtype)
    order = [s for s in trace.steps if s.id in drawn]
    parts = [f'<div class="attnsim" id="{uid}"><style>{STYLE}</style>', _header(trace), _step_list(trace, drawn, uid)]
    for i, step in enumerate(order):
        before = order[i - 1].id if i else None
        after = order[i + 1].id if i + 1 < len(order) else None
        opened = i == 0 or (step.kind == "weights" and step.head == 0)   # the input, and where it leads
        parts.append(_step(trace, step, uid, fractions, tol, before, after, opened))
    parts.append("</div>")
    return "".join(parts)


def chosen_steps(trace) -> set[str]:
    """The ids drawn: every step when the trace is small; else the layer-wide steps, then head by
    head (and the groups they read), while the cells drawn stay within CELL_BUDGET."""
    def cells(step) -> int:
        return min(step.shape[0], MAX_SIDE) * min(step.shape[1], MAX_SIDE)
    by_head: dict = {}
    for s in trace.steps:
        owner = s.head if s.head is not None else (-1 if s.group is None else _first_reader(trace, s.group))
        by_head.setdefault(owner, []).append(s)
    chosen, total = set(), 0
    for owner in sorted(by_head):
        need = sum(cells(s) for s in by_head[owner])
        if chosen and owner > 0 and total + need > CELL_BUDGET:
            break
        chosen.update(s.id for s in by_head[owner])
        total += need
    return chosen


def _first_reader(trace, group: int) -> int:
    return group * (trace.scenario.heads // trace.scenario.groups)


def _header(trace) -> str:
    sc = trace.scenario
    title = f": {_e(short(sc.title, width=TITLE_WIDTH))}" if sc.title else ""
    tokens = " ".join(f"<code>{_e(short(t, i))}</code>" for i, t in enumerate(sc.tokens[:MAX_SIDE]))
    more = f" … ({sc.n} tokens)" if sc.n > MAX_SIDE else ""
    return (f'<div class="as-head"><b>{_e(sc.name)}</b>{title}<br>'
            f'<span class="as-note">arithmetic {_e(trace.arithmetic.preset)} · layout {_e(trace.layout)} · '
            f'{sc.heads} head{"s" if sc.heads != 1 else ""} · tokens: {tokens}{more}</span></div>')


def _step_list(trace, drawn: set, uid: str) -> str:
    """Every step drawn as a link; those left out named, with the call that draws them."""
    links = " ".join(f'<a href="#{uid}-{_e(s.id)}" title="{_e(s.title)}">{_e(s.id)}</a>'
                     for s in trace.steps if s.id in drawn)
    out = [s.id for s in trace.steps if s.id not in drawn]
    note = ""
    if out:
        shown = ", ".join(_e(i) for i in out[:8]) + (f" and {len(out) - 8} more" if len(out) > 8 else "")
        note = (f'<div class="as-note">Not drawn here, to keep the page small: {len(out)} steps ({shown}). '
                f"Draw one with <code>trace.show(&quot;{_e(out[0])}&quot;)</code>; "
                f"its numbers are <code>trace[&quot;{_e(out[0])}&quot;]</code>.</div>")
    return f'<nav><b>Steps</b> ({len(drawn)} of {len(trace.steps)}): {links}{note}</nav>'


def _step(trace, step, uid, fractions, tol, before, after, opened: bool) -> str:
    rows, cols = step.shape
    r, c = min(rows, MAX_SIDE), min(cols, MAX_SIDE)
    a = np.asarray(trace[step.id][:r, :c], dtype=np.float64)
    write = table_writer(a, fractions, tol)
    row_names, col_names = (names[:n] for names, n in zip(step_labels(trace, step, LABEL_WIDTH), (r, c)))
    colours = _colours(a, step.kind in SEQUENTIAL)
    head = "".join(f"<th>{_e(n)}</th>" for n in col_names)
    body = []
    for i in range(r):
        tds = "".join(f'<td style="background-color:{colours[i][j][0]};color:{colours[i][j][1]}" '
                      f'title="{_e(trace.explain(step.id, i, j))}">{_e(write(a[i, j]))}</td>' for j in range(c))
        body.append(f"<tr><th>{_e(row_names[i])}</th>{tds}</tr>")
    move = " ".join(f'<a href="#{uid}-{_e(t)}">{w}</a>' for t, w in ((before, "← previous"), (after, "next →")) if t)
    left = ""
    if (r, c) != (rows, cols):
        left = (f'<div class="as-note">Showing rows 0–{r - 1} of {rows} and columns 0–{c - 1} of {cols}; the whole '
                f'step: <code>trace.show(&quot;{_e(step.id)}&quot;)</code>, its numbers: '
                f'<code>trace[&quot;{_e(step.id)}&quot;]</code>.</div>')
    # the links point into the body: a browser opens the closed <details> around a fragment's target
    return (f'<details data-step="{_e(step.id)}"{" open" if opened else ""}><summary><code>{_e(step.id)}</code> '
            f'{_e(step.title)} · <span class="as-f">{_e(step.formula)}</span> · {rows} × {cols} '
            f'<span class="as-note">({_e(step.axes[0])} × {_e(step.axes[1])})</span>'
            f'<span class="as-move">{move}</span></summary><div id="{uid}-{_e(step.id)}">'
            f'<div class="as-note">{_e(step.why)}</div>'
            f'<div class="as-wrap"><table><tr><th></th>{head}</tr>{"".join(body)}</table></div>{left}</div></details>')


def _colours(a: np.ndarray, sequential: bool) -> list[list[tuple[str, str]]]:
    """(background, ink) of each cell: a ramp from 0 for weights, powers and sums; blue, white and
    red around 0 elsewhere, so that the sign reads at a glance; grey for a −∞ or NaN."""
    finite = a[np.isfinite(a)]
    high = float(np.abs(finite).max()) if finite.size else 0.0
    ramp = RAMP if sequential else DIVERGING
    with np.errstate(all="ignore"):
        t = a / high if high > 0 else np.zeros_like(a)
        t = t if sequential else (t + 1) / 2
    out = []
    for row, trow in zip(a, t):
        line = []
        for v, x in zip(row, trow):
            line.append(MASKED if not np.isfinite(v) else _ramp(ramp, float(np.clip(x, 0.0, 1.0))))
        out.append(line)
    return out


def _ramp(anchors: list[str], x: float) -> tuple[str, str]:
    """The colour a fraction x ∈ [0, 1] of the way along the anchors, and black or white ink."""
    pos = x * (len(anchors) - 1)
    i = min(int(pos), len(anchors) - 2)
    f = pos - i
    lo, hi = (np.array([int(h[k:k + 2], 16) for k in (1, 3, 5)], dtype=float) for h in anchors[i:i + 2])
    rgb = lo + (hi - lo) * f
    ink = "#000000" if (0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]) / 255 > 0.45 else "#ffffff"
    return "#" + "".join(f"{int(round(v)):02x}" for v in rgb), ink


def _e(text) -> str:
    return html.escape(str(text), quote=True)
