"""Step ids (CONTRACT §4, §8, §9): the one place that builds and parses them.

An id is a dotted path of scopes ending in a kind: `x`, `h1.weights`, `kv0.k`, `h0.blk2.acc`,
`prefill.h0.z`, `t5.h0.k_cache`, `t5.concat`. A kind of one part of the layer carries its part
before a dot: `idx.scores` (the lightning indexer), `pool.k`, `hc.pre`. Every other module asks `step_id` for an id and
`parse` for its parts; nothing else formats or splits them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_SCOPES = re.compile(r"^(?:(?P<phase>prefill|t(?P<token>\d+))\.)?(?:h(?P<head>\d+)\.|kv(?P<group>\d+)\.)?"
                     r"(?:blk(?P<block>\d+)\.)?(?P<kind>(?:(?:idx|pool|hc)\.)?[a-z_]+)$")


@dataclass(frozen=True)
class StepRef:
    """The parts of an id: its kind and the scopes it sits in (None where it has none)."""
    kind: str
    head: int | None = None
    group: int | None = None
    block: int | None = None
    token: int | None = None       # a decoded token t (the `t{t}.` prefix)
    prefill: bool = False          # the `prefill.` prefix

    @property
    def id(self) -> str:
        return step_id(self.kind, self.head, group=self.group, block=self.block, token=self.token,
                       prefill=self.prefill)

    def with_kind(self, kind: str, head: int | None = -1) -> str:
        """The id of another kind in the same scopes (and another head, when given)."""
        return step_id(kind, self.head if head == -1 else head, group=self.group, block=self.block,
                       token=self.token, prefill=self.prefill)


def step_id(kind: str, head: int | None = None, *, group: int | None = None, block: int | None = None,
            token: int | None = None, prefill: bool = False) -> str:
    """`h{head}.kind`, `kv{group}.kind`, `h{head}.blk{block}.kind`, each optionally behind
    `prefill.` or `t{token}.`; a layer-wide kind stands alone (`x`, `concat`, `out`)."""
    parts = []
    if prefill:
        parts.append("prefill")
    elif token is not None:
        parts.append(f"t{token}")
    if head is not None:
        parts.append(f"h{head}")
    elif group is not None:
        parts.append(f"kv{group}")
    if block is not None:
        parts.append(f"blk{block}")
    parts.append(kind)
    return ".".join(parts)


def head_prefix(head: int) -> str:
    """`h{head}.`: the start every id of that head shares (for filtering lists of ids)."""
    return step_id("", head)


def parse(sid: str) -> StepRef | None:
    """The parts of an id, or None when it is not one."""
    m = _SCOPES.match(sid) if isinstance(sid, str) else None
    if m is None:
        return None
    num = lambda name: None if m.group(name) is None else int(m.group(name))  # noqa: E731
    return StepRef(kind=m.group("kind"), head=num("head"), group=num("group"), block=num("block"),
                   token=num("token"), prefill=m.group("phase") == "prefill")
