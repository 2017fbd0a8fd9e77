"""What a run is set up with before anything is computed: its arithmetic (the preset with the keys
set on top), its layout and mask, the refusals of combinations it cannot run, and its plan; all
remembered for the same scenario object and options (a classroom-size trace would otherwise spend a
third of its time here)."""
from __future__ import annotations

import weakref

from . import mechanisms
from .arithmetic import Arithmetic, resolve
from .errors import ScenarioError
from .mechanisms.indexer.reader import run_check as indexer_run
from .plan import cached_plan
from .scenario import Scenario, read_mask


_setups: dict = {}   # the last few runs' arithmetic, layout, mask and plan, by scenario and options


def setup(scenario: Scenario, preset: str | None, overrides: dict) -> tuple:
    """The resolved arithmetic, layout, mask and plan of a run, remembered for the same scenario
    object and options (a classroom-size trace would otherwise spend a third of its time here)."""
    try:
        key = (id(scenario), preset, tuple(sorted(overrides.items())))
        got = _setups.get(key)
    except TypeError:   # e.g. a mask given as a list of lists: not remembered
        key, got = None, None
    if got is not None and got[0]() is scenario:
        return got[1:]
    try:
        arith = _resolve(preset or scenario.preset, {**scenario.defaults, **overrides})
        layout = arith.layout or scenario.layout
        mask = scenario.mask if arith.mask is None else read_mask(arith.mask, scenario.n, layout, scenario.m)
        if scenario.decode is not None:
            _decodable(mask, arith)
        mechanisms.refuse_online(scenario, arith)
        indexer_run(scenario, arith.topk, mask)   # --set topk, and the mask an indexer needs
        mechanisms.refuse_arithmetic(scenario, arith.normalize)
    except ScenarioError as err:
        raise _culprit(err, scenario, overrides) from None
    got = (weakref.ref(scenario), arith, layout, mask, cached_plan(scenario, arith, layout, mask))
    if key is not None:
        if len(_setups) >= 16:
            _setups.clear()
        _setups[key] = got
    return got[1:]


def _culprit(err: ScenarioError, scenario: Scenario, overrides: dict) -> ScenarioError:
    """An error in a key the caller set (a keyword of run, the CLI's --set) names that key, the
    file only as what it was set for (the file is not the culprit); any other names the file."""
    if not scenario.source:
        return err
    if err.field.split("[")[0] in overrides:
        return ScenarioError(err.field, f"{err.expected} (for {scenario.source})")
    return err.at(scenario.source)


_presets: dict[tuple, Arithmetic] = {}   # resolved arithmetics, reused (they are immutable)


def _resolve(preset: str, overrides: dict) -> Arithmetic:
    """resolve(), remembered when the overrides are plain values (most runs: none at all)."""
    key = (preset, tuple(sorted(overrides.items())))
    try:
        return _presets[key]
    except TypeError:  # e.g. a mask given as a list of lists
        return resolve(preset, overrides)
    except KeyError:
        if len(_presets) >= 64:
            _presets.clear()
        arith = _presets[key] = resolve(preset, overrides)
        return arith


def _decodable(mask, arithmetic: Arithmetic) -> None:
    """A [decode] run is causal and standard: refused otherwise, before anything runs."""
    if not (isinstance(mask, str) and mask == "causal"):
        raise ScenarioError("mask", "expected causal with [decode] (a decoded token sees only the tokens before "
                            f"it), got {mask if isinstance(mask, str) else 'a matrix'}")
    if arithmetic.online:
        raise ScenarioError("algorithm", "expected standard with [decode] (a decoded token's scores are one row "
                            "already: there is no n × n matrix to avoid)")
