"""What the command line's verbs share: the scenario SCENARIO or --model describes, a run whose
--set errors name the option, and the trace's warnings printed once."""
from __future__ import annotations

import sys

from tracer.errors import ScenarioError

PROG = "attnsim"


def scenario(args, default: str | None = None):
    """SCENARIO as given, or the checkpoint layer that --model, --text and --layer describe
    (built once; its argument errors name the options)."""
    import tracer
    if isinstance(args.scenario, tracer.Scenario):
        return args.scenario
    if args.model is None:
        if args.text is not None or args.layer is not None:   # a model built-in's [model], changed
            return model_scenario(args)
        if args.scenario is None and default is None:
            raise ScenarioError("SCENARIO", "missing; expected a built-in name, a .toml path, or --model PATH --text TEXT")
        return args.scenario or default
    if args.scenario is not None:
        raise ScenarioError("SCENARIO", f"expected either {args.scenario!r} or --model, not both")
    if args.text is None:
        raise ScenarioError("--text", "missing; expected the text for the model to read (with --model)")
    try:
        args.scenario = tracer.from_model(args.model, args.text, 0 if args.layer is None else args.layer)
    except ScenarioError as err:
        flag = {"model.path": "--model", "model.text": "--text", "model.layer": "--layer"}.get(err.field)
        if err.source is None and flag:
            raise ScenarioError(flag, err.expected) from None
        raise
    return args.scenario


def model_scenario(args):
    """SCENARIO's [model] section with --text and --layer in place of its own (induction --layer 0)."""
    import tracer
    given = {key: value for key, value in (("text", args.text), ("layer", args.layer)) if value is not None}
    if args.scenario is None:
        raise ScenarioError(f"--{next(iter(given))}", "expected only with --model PATH or a scenario with a "
                            "[model] section (such as induction)")
    try:
        args.scenario = tracer.load_scenario(args.scenario, model=given)
    except ScenarioError as err:
        key = err.field.removeprefix("model.")
        if key in given:   # the flag is the culprit, not the file
            raise ScenarioError(f"--{key}", err.expected) from None
        raise
    return args.scenario


def traced(args, preset=None, extra=()):
    from tracer.arithmetic import parse_set
    return run(scenario(args), preset or args.arithmetic, parse_set(list(args.set) + list(extra)))


def run(scenario, preset, overrides: dict, **options):
    """tracer.run; an error in a --set value (a mask of the wrong size, relu beside sinks) names
    the option, not the scenario's file."""
    import tracer
    try:
        return tracer.run(scenario, preset, **options, **overrides)
    except ScenarioError as err:
        if err.source is None and err.field.split("[")[0] in overrides:
            raise ScenarioError(f"--set {err.field}", err.expected) from None
        raise


def warn(trace) -> None:
    for message in trace.warnings:
        print(f"{PROG}: warning: {message}", file=sys.stderr)
