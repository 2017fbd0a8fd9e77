"""A student's answers as an npz, one array per step (what `attnsim check` reads), marked by
`attnsim class grade`: each cell judged as check judges it (√ε of the array's dtype times the
step's scale; −∞ or a stand-in ≤ −1e4 for −∞) and handed to the marking as the key's own text
when right, or as the number given when wrong. A step left out is unanswered."""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..check import agree, answer_array, read_npz
from ..errors import ScenarioError, one_line


def read(path, expected: dict) -> dict:
    """(step, row, col) → the text to mark, for the sheet `expected` (the key's entry)."""
    where = str(path)
    given = {}
    for sid, value in read_npz(path).items():
        grid = expected["cells"].get(sid)
        if grid is None:
            raise ScenarioError(one_line(sid, 60), f"is not a step of {expected['id']}'s sheet; expected one of "
                                f"{', '.join(expected['cells'])}", where)
        want = np.array([[float(Fraction(v)) if v != "-inf" else -np.inf for v in row] for row in grid])
        a, tol = answer_array(value, sid, where)
        if a.shape != want.shape:
            if a.size != want.size or a.squeeze().shape != want.squeeze().shape:
                raise ScenarioError(one_line(sid, 60), f"has shape {a.shape}; expected {want.shape[0]} × "
                                    f"{want.shape[1]} as the sheet writes it", where)
            a = a.reshape(want.shape)
        right = agree(a, want, tol)
        for (r, c), ok in np.ndenumerate(right):
            given[(sid, r, c)] = grid[r][c] if ok else f"{float(a[r, c]):.6g}"
    return given
