"""Keys and values shared across layers (Gemma 3n, Gemma 4: `num_kv_shared_layers`; CONTRACT §17):
the last layers compute no keys or values of their own and read those of an earlier layer of their
kind. formula.py says which layer each reads; cache.py what that saves in the KV cache; steps.py
the scenario's `[shared_kv]`, the step kv_x, the titles and the note."""
from __future__ import annotations

from ..declaration import Mechanism
from .steps import read

DECLARATION = Mechanism(
    "kv_sharing", "keys and values shared across layers", field="shared_kv", label="shared_kv", keys=("shared_kv",),
    arguments={"shared_kv": "shared_kv"}, read=read,
    dims=lambda sc: (sc.shared_kv["source"], sc.shared_kv["readers"], sc.shared_kv["x"] is not None),
    arrays=lambda sc: {} if sc.shared_kv["x"] is None else {"shared_kv.x": sc.shared_kv["x"]},
    describe=lambda sc: {"source": sc.shared_kv["source"], "readers": list(sc.shared_kv["readers"]),
                         "x": sc.shared_kv["x"] is not None},
    unfillable=lambda sc: None, decode=False,
    said=lambda arrays: (f"this layer computes no keys or values: they are {arrays['shared_kv']['source']}'s, from "
                         f"what {arrays['shared_kv']['source']}'s attention read (kv_x); it keeps no KV cache")
    if arrays.get("shared_kv") else None)
