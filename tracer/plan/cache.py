"""Plans as the tracer asks for them: the whole layer's or a decode's, remembered by what they
depend on (sizes, arithmetic, layout and mask kind), with each head's ids and the cells to hold."""
from __future__ import annotations

from ..steps import Dims, Step
from .decode import decode_plan
from .layer import layer_plan

_plans: dict[tuple, tuple] = {}   # a plan depends on sizes, arithmetic, layout and mask kind only


def plan(dims: Dims, arithmetic, layout: str, mask) -> list[Step]:
    """The steps a run records, in computation order."""
    if dims.prompt is not None:
        return decode_plan(dims, arithmetic, layout)
    return layer_plan(dims, arithmetic, layout, mask)


def head_ids(steps: list[Step], heads: int, groups: int) -> list[dict[str, str]]:
    """For each query head, the id of each kind it computes or reads (its own steps and its group's)."""
    per = heads // groups
    return [{s.kind: s.id for s in steps if s.head == h or (s.group is not None and s.group == h // per)}
            for h in range(heads)]


def cached_plan(scenario, arithmetic, layout: str, mask) -> tuple[list[Step], dict, int, list]:
    """plan(), with its steps by id, its total number of cells and each head's ids, remembered by
    what it depends on (a small trace's Python work is mostly this)."""
    dims = scenario.dims()
    key = (dims, arithmetic.scale, arithmetic.softmax_base, arithmetic.normalize, arithmetic.stable,
           arithmetic.algorithm, arithmetic.block if arithmetic.online else 0,
           layout, mask if isinstance(mask, str) else "matrix")
    got = _plans.get(key)
    if got is None:
        if len(_plans) >= 64:
            _plans.clear()
        steps = plan(dims, arithmetic, layout, mask)
        # a decoded token's cache is a view of one growing buffer: its cells are not its own
        own = sum(s.shape[0] * s.shape[1] for s in steps if s.kind not in ("k_cache", "v_cache"))
        # a decode's per-token steps are found by id, not by kind (tracer/decode.py)
        got = _plans[key] = (steps, {s.id: s for s in steps}, own,
                             head_ids(steps if dims.prompt is None else [], dims.heads, dims.kv_heads))
    steps, by_id, cells, ids = got
    return list(steps), by_id, cells, ids


def cells(dims: Dims, arithmetic, mask="causal") -> tuple[int, int]:
    """(cells of one head's steps, cells of the steps outside the heads): what memory estimates use."""
    steps = plan(dims, arithmetic, "rows", mask)
    head = sum(s.shape[0] * s.shape[1] for s in steps if s.head == 0 or s.group == 0)
    return head, sum(s.shape[0] * s.shape[1] for s in steps if s.head is None)


