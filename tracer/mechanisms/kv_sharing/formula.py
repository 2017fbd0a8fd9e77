"""Which layer's keys and values each layer reads under `num_kv_shared_layers` = S (Gemma 3n and
Gemma 4, as transformers' `kv_sharing_modes`): the first L − S layers compute their own; each of
the last S layers reads those of the LAST earlier layer of its own type (sliding or full) among
the first L − S, which "stores" them. A reading layer still has its own W_Q (and q-norm): its
queries are new, the keys and values it matches them with are the source layer's, computed from
the source layer's input x, with the source layer's norms and rotation."""
from __future__ import annotations


def sources(layer_types: list[str], shared: int) -> list[int]:
    """For each layer, the layer whose keys and values it attends with (itself when it computes
    its own). A type among the last S layers with no earlier layer of its type is refused."""
    count = len(layer_types)
    if not 0 <= shared <= count:
        raise ValueError(f"num_kv_shared_layers: expected 0 to {count}, got {shared}")
    first = count - shared
    if shared and first == 0:
        raise ValueError("num_kv_shared_layers: every layer shares, so no layer computes keys and values")
    last = {t: i for i, t in enumerate(layer_types[:first])}   # the last earlier layer of each type
    out = []
    for i, t in enumerate(layer_types):
        if i < first:
            out.append(i)
        elif t in last:
            out.append(last[t])
        else:
            raise ValueError(f"layer {i} ({t}) shares keys and values, but no layer before layer {first} is {t}")
    return out


def stores(layer_types: list[str], shared: int) -> list[int]:
    """The layers whose keys and values are read by a later layer (transformers' "store" layers)."""
    first = len(layer_types) - shared
    return sorted({s for i, s in enumerate(sources(layer_types, shared)) if i >= first})
