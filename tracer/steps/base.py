"""What a step kind is (Kind), what a recorded step is (Step), and the one registry of kinds.

A kind declares everything the rest of the system needs: title, axes, scope, when it is present,
what it reads, its formula, and how one of its cells is explained and where it came from.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..ids import step_id

KINDS: dict[str, "Kind"] = {}   # in computation order within each scope (registration order)
SCOPES = ("input", "kv", "head", "block", "cache", "layer")
# before the heads; per key/value head (a group when grouped-query); per query head; per key block
# of a head under the online algorithm; a decoded token's key/value cache; after the heads


@dataclass(frozen=True)
class Dims:
    """The sizes and switches a plan depends on (nothing else of a scenario)."""
    n: int
    d_model: int
    heads: int
    d_k: int
    d_v: int
    d_out: int
    rank: int = 0
    output: bool = False          # a W_O is given
    residual: str | None = None   # None, "none" (R = X + O only) or "layer" (then a norm)
    m: int | None = None          # keys (the context's tokens under cross-attention); None: n
    groups: int | None = None     # key/value heads (grouped-query when fewer than heads); None: heads
    d_context: int | None = None  # the context's width under cross-attention
    norm_in: bool = False         # a norm before the projections (a real model's layer)
    norm_kind: str = "layer"      # its kind: "layer" or "rms"
    biases: frozenset = frozenset()   # which projections add a bias: "q", "k", "v", "o"
    v_is_k: bool = False          # the values are the keys
    prompt: int | None = None     # [decode]: tokens processed at once before decoding one at a time
    parts: tuple = ()             # the mechanisms of today's checkpoints the layer has, in the registry's
    #                               order: ((name, what a plan depends on of it), …) (tracer/mechanisms)

    def of(self, name: str):
        """What a plan depends on of mechanism `name` (QK-norm's scope, the cap C …), None without it."""
        return next((value for key, value in self.parts if key == name), None)

    @property
    def rope(self) -> dict | None:
        """The rotary positions' spec, None without them."""
        from ..mechanisms.rotary.frequencies import thaw
        spec = self.of("rotary")
        return None if spec is None else thaw(spec)

    @property
    def latent(self) -> tuple:
        """Latent attention's sizes: (rank, rope, nope, q_rank or 0, kv_norm, q_norm); () without it."""
        return self.of("latent") or ()

    @property
    def pairs(self) -> int:
        """Rotated pairs of features per head (partial rotary: fewer than d_k/2)."""
        if self.latent:
            return self.latent[1] // 2
        rope = self.rope
        return (rope.get("dims") or self.d_k) // 2 if rope is not None else 0

    @property
    def keys(self) -> int:
        return self.n if self.m is None else self.m

    @property
    def kv_heads(self) -> int:
        return self.heads if self.groups is None else self.groups

    @property
    def textbook(self) -> bool:
        """The 2017 layer: no biases, groups, norms, context, shared keys or mechanisms of today's
        checkpoints (rotary positions among them)."""
        return not (self.grouped or self.norm_in or self.v_is_k or self.d_context or self.biases - {"o"}
                    or self.parts)

    @property
    def grouped(self) -> bool:
        return self.kv_heads < self.heads


@dataclass(frozen=True)
class Kind:
    name: str
    title: str
    axes: object                                 # (row, column) in the rows layout, or ctx → that
    scope: str                                   # one of SCOPES
    why: object                                  # why the step is done, in plain words: a str, or
                                                 # ctx → str where the words depend on the layer (sinks)
    formula: Callable[["Context"], str]
    explain: Callable[["Cell"], str]             # the cell's story after its label
    sources: Callable[["Cell"], dict]            # {step id: [(row, col)]} in the rows orientation
    inputs: Callable[["Context", int | None], list[str]]
    present: Callable[["Context"], bool] = lambda ctx: True
    width: Callable[[Dims], int] | None = None   # a column count the axes do not give (concat)
    short: str | None = None                     # the kind as ids write it, when the registry's name differs
                                                 # (`blk_max` is the `max` of `h0.blk2.max`)
    chain: str | None = None                     # the quantity it is a stage of ("query": q, q_norm, q_rot;
                                                 # "logits": scores … masked): a reader takes its latest stage
    tip: str = ""                                # what to do with the inputs, in words: the TUI's hint for a
                                                 # wrong answer (never an example: no value can leak)

    @property
    def word(self) -> str:
        return self.short or self.name

    def why_in(self, ctx: "Context") -> str:
        """Why the step is done, as this layer does it."""
        return self.why(ctx) if callable(self.why) else self.why


def register(kind: Kind, after: str | None = None) -> Kind:
    """Adds a kind to the registry: at the end, or right after the kind `after` (a mechanism's
    module says where its step sits in the computation, wherever it is imported)."""
    assert kind.scope in SCOPES and kind.name not in KINDS and (after is None or after in KINDS), kind.name
    if after is None:
        KINDS[kind.name] = kind
        return kind
    order = list(KINDS.items())
    at = next(n for n, (name, _) in enumerate(order) if name == after) + 1
    order.insert(at, (kind.name, kind))
    KINDS.clear()
    KINDS.update(order)
    return kind


# what the mechanisms say in the shared steps, and the keys they hide: filled from their declarations
# (mechanisms/__init__.tell), read by the steps, the trace and the range checks without naming any
TOLD: dict[str, list] = {}     # a step's part ("sums.why") → [(mechanism, its Scenario field, its words)]
HIDERS: dict[str, tuple] = {}  # mechanism → (its Scenario field, (trace, h) → the keys each query does not see)


def tell(name: str, field: str, texts: dict, hides=None) -> None:
    for part, words in texts.items():
        TOLD.setdefault(part, []).append((name, field, words))
    if hides is not None:
        HIDERS[name] = (field, hides)


def said(part: str, about, *args):
    """A mechanism's own words for a shared step's part (the sinks' in the softmax's steps …) when
    the layer has one that changes them, else None. `about` is a plan's context (its dims say what is
    present) or a cell (its scenario does); args go to the mechanism's words."""
    dims = getattr(about, "dims", None)
    for name, field, words in TOLD.get(part, ()):
        if (dims.of(name) if dims is not None else getattr(about.scenario, field)) is not None:
            told = words(about, *args)
            if told is not None:
                return told
    return None


def hider(scenario):
    """(trace, h) → query × key, True where head h's query does not see the key, from a mechanism that
    hides keys head by head beyond the mask (an additive mask's −∞); None without one."""
    return next((hides for field, hides in HIDERS.values() if getattr(scenario, field) is not None), None)

@dataclass(frozen=True)
class Context:
    """What a plan is decided from: sizes, arithmetic, layout and mask."""
    dims: Dims
    arithmetic: object
    columns: bool
    mask: object                  # "none" | "causal" | a query × key bool matrix
    present: frozenset = field(default=frozenset())

    @property
    def masked(self) -> bool:
        hides = any(self.dims.of(name) is not None for name in HIDERS)   # an additive mask writes the step too
        return not (isinstance(self.mask, str) and self.mask == "none") or hides

    @property
    def cross(self) -> bool:
        return self.dims.d_context is not None

    def has(self, kind: str) -> bool:
        return kind in self.present

    def sid(self, kind: str, head: int | None = None) -> str:
        """The id of `kind` as query head `head` reads it (its group's, for grouped keys and values)."""
        scope, word = KINDS[kind].scope, KINDS[kind].word   # the id's word (q_norm after the rotation too)
        if scope == "kv" and self.dims.grouped:
            return step_id(word, group=head // (self.dims.heads // self.dims.kv_heads))
        return step_id(word, head if scope in ("head", "kv") else None)

    def source(self) -> str:
        """What the projections of queries read: the normed input when there is a norm_in."""
        return "norm_in" if self.has("norm_in") else "x"

    def kv_source(self) -> str:
        """What keys and values are projected from: the context, the latent (MLA), or the queries' source."""
        return "context" if self.cross else "c_kv" if self.dims.latent else "kv_x" if self.has("kv_x") else self.source()

    def last(self, head: int | None, *kinds: str) -> str:
        """The first of `kinds` present, as an id: what a step reads when earlier steps are optional."""
        return next(self.sid(k, head) for k in kinds if self.has(k))

    def latest(self, head: int | None, chain: str, before: str) -> str | None:
        """The id of the last stage of `chain` present that is computed before kind `before` (the
        queries a rotation reads: q_norm when there is QK-norm, else q), or None."""
        kind = latest_stage(self.present, chain, before)
        return None if kind is None else self.sid(kind, head)


def stages(chain: str) -> list[str]:
    """The kinds of a chain, in computation order."""
    return [name for name, kind in KINDS.items() if kind.chain == chain]


def latest_stage(present, chain: str, before: str | None = None) -> str | None:
    """The last kind of `chain` in `present` (kind names) that is registered before `before`
    (anywhere, when None)."""
    found = None
    for name, kind in KINDS.items():
        if name == before:
            break
        if kind.chain == chain and name in present:
            found = name
    return found


@dataclass(frozen=True)
class Step:
    """One recorded intermediate: where it sits, how it is computed, its axes and shape
    (in the trace's layout). The array itself is `trace[step.id]`."""
    id: str
    kind: str
    head: int | None
    formula: str
    inputs: tuple[str, ...]
    axes: tuple[str, str]
    shape: tuple[int, int]
    group: int | None = None      # the key/value group of a grouped-query step (kv{g}.…)
    key: str = ""                 # its kind's name in the registry, when not the id's kind (blk_max)
    starts: tuple[int, int] = (0, 0)   # token index of the first row and column, in the layout
                                       # (a key block starts at its first key; a decoded row at t)
    about: str = ""               # why it is done, as its plan said (Kind.why_in); "" for the kind's words
    heading: str = ""             # its title, where the plan says more than the kind's (a shared key's source)

    @property
    def spec(self) -> "Kind":
        return KINDS[self.key or self.kind]

    @property
    def title(self) -> str:
        from ..ids import parse
        title, ref = self.heading or self.spec.title, parse(self.id)
        where = [f"token {ref.token}"] if ref.token is not None else ["prefill"] if ref.prefill else []
        where += [f"group {self.group}"] if self.group is not None else [f"head {self.head}"] if self.head is not None else []
        where += [f"block {ref.block}"] if ref.block is not None else []
        return f"{title} ({', '.join(where)})" if where else title

    @property
    def why(self) -> str:
        return self.about or (self.spec.why if isinstance(self.spec.why, str) else "")

    def describe(self) -> dict:
        return dict(id=self.id, title=self.title, formula=self.formula, inputs=list(self.inputs),
                    axes=list(self.axes), shape=list(self.shape))
