"""What a mechanism declares, once, in its own module: the scenario keys it reads, the Scenario field
it sets, what a plan depends on, its inputs for the exports, which paths run it (and the refusal where
one does not), its checkpoint mapping. The rest of the house reads these records (registry.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


def per_head(values) -> str:
    """`0.5` for one head, `0.5 (head 0), 0.25 (head 1)` for more: a scalar given per head, in words."""
    values = [f"{float(v):g}" for v in values]
    return values[0] if len(values) == 1 else ", ".join(f"{v} (head {h})" for h, v in enumerate(values))


def _nothing(*_) -> dict:
    return {}


def _none(*_):
    return None


@dataclass(frozen=True)
class Mechanism:
    """One mechanism of today's checkpoints (QK-norm, soft-capping, rotary positions …).

    Its step kinds register themselves in its module (steps/base.register); its kernel arithmetic
    lives in kernels/ (a kernel fuses several); its family switch in models/families.py."""
    name: str                       # the registry's name: qk_norm, softcap, rotary, latent …
    words: str                      # as a sentence names it: "soft-capping"
    field: str                      # the Scenario field holding it (None there: the layer has none)
    label: str                      # how a refusal names it: "softcap", "weights.sinks", "[mla]"
    keys: tuple = ()                # the scenario file's top-level keys it reads ("softcap", "[out_norm]" …)
    weight_keys: tuple = ()         # the keys of [weights] it reads ("q_norm", "sinks" …)
    arguments: dict = field(default_factory=dict)   # its keywords of from_arrays → where a file puts
    #                                 them ("qk_norm_eps" → "weights.norm_eps")
    read: Callable | None = None    # (scenario, data) → {Scenario field: value}, read and checked once the
    #                                 layer's sizes are known; None: the build reads it with the projections
    dims: Callable = lambda sc: True   # scenario → what a plan depends on (hashable, truthy)
    arrays: Callable = _nothing     # scenario → {input name: array}: what `largest` and `exact` look at
    describe: Callable = _none      # scenario → its entry in Scenario.describe() (under `name`'s key)
    describe_key: str = ""          # that key, when not `name` ("rope", "mla")
    describe_early: bool = False    # described beside the layer's shape, before its inputs (positions)
    projections: Callable | None = None   # trace → its own matrices in the exports, in place of the layer's
    #                                       W_Q, W_K, W_V (latent attention builds them from [mla])
    given: Callable = lambda trace: []   # trace → [(name, axes, array)]: its inputs in the exports
    symbols: dict = field(default_factory=dict)   # a given input's name → what a panel calls it
    factor: Callable = _none        # (trace, step) → (name, matrix) a step multiplies by, for its panel
    given_words: Callable = _none   # scenario → the numbers a worksheet must state (its scalars), or None
    unfillable: Callable = _none    # scenario → why a classroom sheet cannot be pencil numbers, or None
    fused: bool = True              # the fused kernels run it (else the trace runs stage by stage)
    online: bool = True             # the online algorithm's blocks run it (else refused by `label`)
    decode: bool = True             # [decode] runs it token by token (else refused by `label`)
    arithmetic: Callable | None = None   # (scenario, normalize, field): refuses an arithmetic it cannot go with
    config: Callable = _none        # (config.json's dict, Family) → what the checkpoint says of it, or None
    checkpoint: Callable = _nothing   # (block, Config, layer) → from_arrays keywords for a traced layer
    per_head: dict = field(default_factory=dict)   # its keywords holding one entry per query head ("head")
    #                                 or key/value group ("group"): what keeping a few heads keeps
    said: Callable = _none          # from_arrays keywords → words for a checkpoint layer's description
    texts: dict = field(default_factory=dict)   # the words it changes in a shared step: "kind.part" →
    #                                 fn(ctx or cell, …) → its text, or None to keep the step's own
    #                                 ("sums.why", "masked.explain" …: steps/base.said)
    hides: Callable | None = None   # (trace, h) → query × key, True where head h's query does not see the
    #                                 key (the mask's and its own hiding, e.g. an additive mask's −∞)
    dropped: Callable = _none       # (trace, step) → where a head's query × key step has keys the mask lets
    #                                 the query see but the mechanism dropped (an indexer's choice), in the
    #                                 trace's layout (what a view dims), or None
    chosen: Callable = _none        # (trace, step, row, col) → words on the cell's query's choice for a
    #                                 status line ("query sat kept 2 of 4 keys (top-2)"), or None

    def on(self, scenario) -> bool:
        """Whether the scenario's layer has it."""
        return getattr(scenario, self.field) is not None
