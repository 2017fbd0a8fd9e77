"""The mechanisms of today's checkpoints, one module (or small package) each: its declaration (a
`Mechanism`), its step kinds, its scenario reader and its one NumPy formula. This is the one list of
them; the scenario reader, the refusals, describe, the exports and the checkpoint loader read it.

The order is the computation's where it matters (the kinds of each register after their neighbours),
and the order refusals and descriptions name them in. Adding one: docs/architecture.md."""
from __future__ import annotations

from ..errors import ScenarioError
from ..steps.base import tell
from .declaration import Mechanism

from . import qk_norm, softcap, alibi, sinks, score_bias, out_norm, rotary, latent, v_norm  # noqa: E402
from . import indexer  # noqa: E402
from .norm_after_rope import steps as _after_rope  # noqa: E402,F401  QK-norm's steps after the rotation
from . import q_temp  # noqa: E402
from . import kv_sharing  # noqa: E402
from . import output_gate, linear  # noqa: E402
from . import compressed  # noqa: E402

MECHANISMS: dict[str, Mechanism] = {m.DECLARATION.name: m.DECLARATION for m in
                                    (qk_norm, softcap, alibi, sinks, score_bias, out_norm, rotary, latent, v_norm,
                                     indexer, q_temp, kv_sharing, output_gate, linear, compressed)}
for _m in MECHANISMS.values():   # their words in the shared steps and the keys they hide, where the steps read them
    tell(_m.name, _m.field, _m.texts, _m.hides)

__all__ = ["MECHANISMS", "Mechanism", "arrays", "chosen", "described", "dims", "dropped_cells", "fused", "given",
           "present", "read", "refuse_arithmetic", "refuse_decode", "refuse_online", "top_keys", "weight_keys"]


def present(scenario) -> list[Mechanism]:
    """The mechanisms the scenario's layer has, in the registry's order."""
    return [m for m in MECHANISMS.values() if m.on(scenario)]


def top_keys() -> tuple[str, ...]:
    return tuple(k for m in MECHANISMS.values() for k in m.keys)


def weight_keys() -> tuple[str, ...]:
    return tuple(k for m in MECHANISMS.values() for k in m.weight_keys)


def arguments() -> dict[str, str]:
    """Each mechanism's keywords of `from_arrays`, and where a scenario file puts them (`weights.sinks`)."""
    return {keyword: place for m in MECHANISMS.values() for keyword, place in m.arguments.items()}


def read(scenario, data: dict) -> None:
    """Each mechanism read by its own reader, once the layer's sizes are known."""
    for m in MECHANISMS.values():
        if m.read is not None:
            for name, value in m.read(scenario, data).items():
                setattr(scenario, name, value)


def dims(scenario) -> tuple:
    """What a plan depends on of each mechanism present: ((name, value), …)."""
    return tuple((m.name, m.dims(scenario)) for m in present(scenario))


def arrays(scenario) -> dict:
    """Every mechanism's inputs by name (QK-norm's gains, ALiBi's slopes …)."""
    return {name: a for m in present(scenario) for name, a in m.arrays(scenario).items()}


def described(scenario) -> tuple[dict, dict]:
    """describe()'s entries: (those told beside the layer's shape, the rest)."""
    early, late = {}, {}
    for m in present(scenario):
        entry = m.describe(scenario)
        if entry is not None:
            (early if m.describe_early else late)[m.describe_key or m.name] = entry
    return early, late


def given(trace) -> list:
    return [g for m in present(trace.scenario) for g in m.given(trace)]


def dropped_cells(trace, step):
    """Where a head's query × key step has keys the mask lets a query see but a mechanism of the layer
    dropped (a lightning indexer's choice), in the trace's layout: what a view dims; None without."""
    return next((cells for m in present(trace.scenario) if (cells := m.dropped(trace, step)) is not None), None)


def chosen(trace, step, row: int, col: int) -> str:
    """A mechanism's words on the choice of the query under a cursor (row, col in the layout), or ""."""
    return next((words for m in present(trace.scenario) if (words := m.chosen(trace, step, row, col))), "")


def fused(scenario) -> bool:
    """Whether the fused kernels run every mechanism of the layer."""
    return all(m.fused for m in present(scenario))


def refuse_online(scenario, arithmetic) -> None:
    """The online algorithm's blocks run the scores as they are: a mechanism that changes them is refused."""
    if not arithmetic.online:
        return
    m = next((m for m in present(scenario) if not m.online), None)
    if m is not None:
        raise ScenarioError("algorithm", f"expected standard with {m.label} (the online algorithm's blocks are not "
                            "capped, biased or given a sink here; the standard one shows each step)")


def refuse_decode(scenario) -> None:
    """[decode] runs the textbook layer token by token: a mechanism it does not run is refused."""
    if scenario.decode is None:
        return
    m = next((m for m in present(scenario) if not m.decode), None)
    if m is not None:
        words = [m.words for m in MECHANISMS.values() if not m.decode]
        raise ScenarioError(m.label, "expected no [decode] section with it (decoding token by token runs the "
                            f"layer without {', '.join(words[:-1])} or {words[-1]}); trace the whole layer at "
                            "once instead")


def refuse_arithmetic(scenario, normalize: str, field: str = "normalize") -> None:
    """A mechanism that needs a kind of weights (a sink: softmax's) refuses the others by `field`."""
    for m in present(scenario):
        if m.arithmetic is not None:
            m.arithmetic(scenario, normalize, field)
