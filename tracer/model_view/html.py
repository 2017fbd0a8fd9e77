"""The model view as HTML for a notebook (`_repr_html_`; HTML and CSS only, no script): what the
model keeps and its best heads, then a row per layer (its kind and memory) with one tile per head,
each a small PNG in the page (drawn here with zlib, no plotting library), its two strongest roles
under it and every score and singular value in its `title`, shown on hover."""
from __future__ import annotations

import base64
import html
import struct
import zlib

import numpy as np

from ..html import DIVERGING, RAMP
from .report import footer, layer_line
from .roles import ROLES

PIXELS = 48   # a tile's side on the page
STYLE = """
.attnsim-model{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:13px;color:inherit}
.attnsim-model .as-note{opacity:.8;font-size:12px;margin:2px 0}
.attnsim-model table{border-collapse:collapse;margin-top:6px}
.attnsim-model th{font-weight:normal;text-align:left;padding:4px 10px 4px 0;font-size:12px;max-width:18em}
.attnsim-model td{padding:2px 3px;text-align:center;font-size:10px;vertical-align:top}
.attnsim-model img{image-rendering:pixelated;border:1px solid rgba(128,128,128,.5);display:block;margin:auto}
"""


def view_html(view) -> str:
    shown = " ".join(f"<code>{_e(t)}</code>" for t in view.tokens[:16]) + (" …" if len(view.tokens) > 16 else "")
    notes = "".join(f'<div class="as-note">{_e(line)}</div>' for line in footer(view))
    head = (f"<div><b>{_e(view.name)}</b> ({_e(view.model_type)}): {view.layer_count} layers, "
            f"{len(view.tokens)} tokens: {shown}</div>{notes}")
    most = max((r.heads for r in view.layers), default=0)
    top = "".join(f"<td>h{h}</td>" for h in range(most))
    rows = [f"<tr><th></th>{top}</tr>"] + [_row(r) for r in view.layers]
    return f'<div class="attnsim-model"><style>{STYLE}</style>{head}<table>{"".join(rows)}</table></div>'


def _row(row) -> str:
    cells = []
    for h in range(row.heads):
        s = {r: float(row.scores[r][h]) for r in ROLES}
        strongest = sorted(ROLES, key=lambda r: -s[r])[:2]
        sigmas = "".join(f"; {name} σ {' '.join(f'{v:.3g}' for v in m[h])}"
                         for name, m in (("qk", row.qk), ("ov", row.ov)) if m is not None)
        title = f"layer {row.layer} head {h}: " + ", ".join(f"{r} {s[r]:.3f}" for r in ROLES) + sigmas
        cells.append(f'<td title="{_e(title)}"><img alt="layer {row.layer} head {h}" width="{PIXELS}" '
                     f'height="{PIXELS}" src="data:image/png;base64,{_png(row.tiles[h], row.signed)}">'
                     + "<br>".join(f"{r[:4]} {s[r]:.2f}" for r in strongest) + "</td>")
    return f"<tr><th>{_e(layer_line(row))}</th>{''.join(cells)}</tr>"


def _png(a: np.ndarray, signed: bool) -> str:
    """The tile as a base64 PNG: 0 to its largest along the sequential ramp, or around 0 along
    the diverging one for a signed matrix."""
    top = float(np.abs(a).max()) or 1.0
    t = (a / top + 1) / 2 if signed else a / top
    anchors = DIVERGING if signed else RAMP
    stops = np.array([[int(c[k:k + 2], 16) for k in (1, 3, 5)] for c in anchors], dtype=float)
    at = np.linspace(0.0, 1.0, len(anchors))
    rgb = np.stack([np.interp(np.clip(t, 0, 1), at, stops[:, c]) for c in range(3)], axis=-1)
    return base64.b64encode(png_bytes(np.round(rgb).astype(np.uint8))).decode("ascii")


def png_bytes(rgb: np.ndarray) -> bytes:
    """An 8-bit RGB PNG of rgb (rows × cols × 3): signature, IHDR, one zlib IDAT, IEND."""
    rows, cols = rgb.shape[:2]

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(b"\x00" + rgb[r].tobytes() for r in range(rows))      # filter 0 on every row
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", cols, rows, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def _e(text) -> str:
    return html.escape(str(text), quote=True)
