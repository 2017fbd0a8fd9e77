"""One cell of a recorded step, as the kinds' explanations see it: its value, its neighbours'
arrays, how to write a number and a token, and the dot-product text most explanations share."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..ids import parse
from ..labels import short, token_name

MAX_TERMS = 8  # a dot product of 768 terms is summarised after this many


@dataclass
class Cell:
    trace: object
    step: object
    i: int              # row and column in the rows orientation (query/token first)
    j: int
    f: Callable[[float], str]    # a number as written: 3, 1/3, 0.2119, −∞
    fa: Callable[[float], str]   # the same with the decimal beside a fraction: 27/46 ≈ 0.587

    @property
    def value(self) -> float:
        return self.rows(self.step.id)[self.i, self.j]

    @property
    def scenario(self):
        return self.trace.scenario

    @property
    def arithmetic(self):
        return self.trace.arithmetic

    def rows(self, sid: str) -> np.ndarray:
        return self.trace.rows(sid)

    def sid(self, kind: str) -> str:
        """The id of another kind in this cell's scopes (same head, same block, same token)."""
        return parse(self.step.id).with_kind(kind)

    @property
    def starts(self) -> tuple[int, int]:
        """Token index of the step's first row and column, in the rows orientation."""
        s = self.step.starts
        return (s[1], s[0]) if self.trace.columns else s

    @property
    def at(self) -> int:
        """The token of this cell's row: a decoded token's row 0 is token t."""
        return self.i + self.starts[0]

    def token(self, index: int) -> str:
        """A token by name (`the#3` where the name repeats: its index, from 0)."""
        return token_name(self.scenario.tokens, index)

    def key_token(self, index: int) -> str:
        """A key's token: the context's under cross-attention."""
        return token_name(self.scenario.key_tokens, index)

    def feature(self, index: int) -> str:
        names = self.scenario.features
        return f"feature {index}" + (f" ({short(names[index])})" if names else "")

    def names(self) -> tuple[str, str]:
        """The cell's row and column names in the rows orientation: token names, or an index."""
        def name(axis, index):
            if axis in ("token", "query"):
                return self.token(index)
            if axis in ("context", "key"):
                return self.key_token(index)
            return str(index)
        axes = self.step.axes[::-1] if self.trace.columns else self.step.axes
        (r0, c0) = self.starts
        return name(axes[0], self.i + r0), name(axes[1], self.j + c0)

    def label(self) -> str:
        """`h0.weights[key x2, query x1]`: the cell as the layout writes it, query and key said."""
        axes = self.step.axes[::-1] if self.trace.columns else self.step.axes
        a, b = (f"{axis} {n}" if axis in ("query", "key") else n for axis, n in zip(axes, self.names()))
        if self.step.kind in ("sums", "sink"):   # one number per query
            return f"{self.step.id}[{a}]"
        return f"{self.step.id}[{b}, {a}]" if self.trace.columns else f"{self.step.id}[{a}, {b}]"

    def dot(self, xs, ys) -> str:
        terms = [f"{self.f(a)}×{self.f(b)}" for a, b in zip(xs[:MAX_TERMS], ys[:MAX_TERMS])]
        more = len(xs) - MAX_TERMS
        return " + ".join(terms) + (f" + … ({more} more terms)" if more > 0 else "")

    def project(self, left: np.ndarray, w: np.ndarray, w_name: str, left_name: str, bias=None,
                at: int | None = None) -> str:
        """A projection cell: a row of the left factor (row `at`, default the cell's) times a
        column of W (W·X in columns), plus the bias term when there is one."""
        row, col, j = left[self.i if at is None else at], w[:, self.j], self.j
        plus = "" if bias is None else f" + b[{j}]"
        terms = "" if bias is None else f" + {self.f(bias[j])}"
        if self.trace.columns:
            return f"= {w_name}[{j}, :]·{left_name}{plus} = {self.dot(col, row)}{terms} = {self.f(self.value)}"
        return f"= {left_name}·{w_name}[:, {j}]{plus} = {self.dot(row, col)}{terms} = {self.f(self.value)}"


def whole_row(sid: str, i: int, width: int) -> dict:
    return {sid: [(i, m) for m in range(width)]}
