"""The model view as a picture (`attnsim export --model … --figure model`, ModelView.save): a row
per layer, its kind and memory on the left, one tile per head (its weights made small; a signed
matrix on a diverging scale) with the head's two strongest roles under it, and what the whole model
keeps in the caption. Laid out by hand in inches, as heatmap.py does."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..model_view.report import size
from ..model_view.roles import ROLES
from .common import text_width

TILE, GAP, BELOW = 0.62, 0.12, 0.3    # inches: a tile's side, the space between tiles, its roles' lines
TOP, MARGIN = 0.85, 0.25
SHORT = {"previous": "prev", "first": "first", "duplicate": "dup", "induction": "ind"}


def write_model_figure(view, path, fmt: str | None = None) -> Path:
    """Draws the view and writes it atomically to `path`, SVG or PNG."""
    from . import common, picture_format
    name = picture_format(path, fmt)
    common.render(lambda Figure: draw(view, Figure), path, name)
    return Path(path)


def model_svg(view) -> str:
    from . import common
    return common.svg_text(lambda Figure: draw(view, Figure))


def _caption(view) -> str:
    return (f"{view.name} ({view.model_type}), {view.layer_count} layers, {len(view.tokens)} tokens\n"
            f"cache at {view.context:,} tokens ({view.dtype}): {size(view.cache_bytes)}  ·  "
            f"multi-head attention: {size(view.mha_cache_bytes)}")


def _label(row) -> str:
    m = row.memory
    return (f"layer {row.layer}: {row.kind}\n{row.heads} q / {row.kv_heads} kv heads\n{m.per_token:,} a token"
            + (f", last {m.window:,}" if m.window is not None else "") + (f"\nstate {m.state:,}" if m.state else "")
            + (f"\n+ {m.pooled[1]:,} every {m.pooled[0]:,} tokens" if m.pooled else ""))   # compressed entries (V4)


def draw(view, Figure):
    rows = view.layers
    labels = [_label(r) for r in rows]
    left = MARGIN + max((text_width(t, 8) for t in labels), default=1.0) + 2 * GAP
    most = max((r.heads for r in rows), default=1)
    line = _caption(view)
    width = max(left + most * (TILE + GAP) + MARGIN, text_width(line, 9) + 2 * MARGIN)
    row_h = TILE + BELOW + GAP
    height = TOP + len(rows) * row_h + MARGIN
    fig = Figure(figsize=(width, height))
    fig.text(0.5, 1 - 0.15 / height, line, ha="center", va="top", fontsize=9, color="#444444")
    for n, row in enumerate(rows):
        y = TOP + n * row_h                                    # inches from the top
        fig.text(MARGIN / width, 1 - (y + TILE / 2) / height, labels[n], ha="left", va="center", fontsize=8)
        for h in range(row.heads):
            x = left + h * (TILE + GAP)
            ax = fig.add_axes((x / width, 1 - (y + TILE) / height, TILE / width, TILE / height))
            _tile(ax, row.tiles[h], row.signed)
            if n == 0 or row.heads != rows[n - 1].heads:
                ax.set_title(f"h{h}", fontsize=7, pad=2)
            strongest = sorted(ROLES, key=lambda r: -row.scores[r][h])[:2]
            said = "\n".join(f"{SHORT[r]} {row.scores[r][h]:.2f}" for r in strongest)
            fig.text((x + TILE / 2) / width, 1 - (y + TILE + 0.03) / height, said, ha="center", va="top",
                     fontsize=6, color="#333333")
    return fig


def _tile(ax, a: np.ndarray, signed: bool) -> None:
    """The tile: weights from 0 (dark) to its largest (yellow); a signed matrix blue–white–red around 0."""
    top = float(np.abs(a).max()) or 1.0
    if signed:
        ax.imshow(a, cmap="RdBu_r", vmin=-top, vmax=top, interpolation="nearest", aspect="auto")
    else:
        ax.imshow(a, cmap="viridis", vmin=0.0, vmax=top, interpolation="nearest", aspect="auto")
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_linewidth(0.4)

