"""The plan of a run: which steps it records, in computation order, with their formulas, inputs,
axes and shapes, all derived from the kinds' declarations before any number is computed.

    layer.py   the whole layer's steps (every head, each key block under the online algorithm)
    decode.py  a [decode] run's: the prompt at once, then each later token against the cache
    cache.py   plans as the tracer asks for them, remembered by what they depend on"""
from .cache import cached_plan, cells, head_ids, plan

__all__ = ["cached_plan", "cells", "head_ids", "plan"]
