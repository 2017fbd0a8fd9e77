"""The `attnsim check` verb (CONTRACT §19): your own attention's intermediates, an npz keyed by step
ids, compared with the trace; the first difference, how it is computed and its likely cause.
Exit 0: every given step matches; 1: a difference; 2: bad input."""
from __future__ import annotations

import json


def check_parser(sub, run_options, scenario_help: str) -> None:
    c = sub.add_parser("check", help="compare your own code's intermediates (an npz keyed by step ids) with the "
                       "trace: the first differing cell and its likely cause")
    c.add_argument("scenario", help=scenario_help)
    c.add_argument("answers", metavar="ANSWERS.npz", help="numpy.savez(path, **{'h0.scores': …, 'h0.weights': …}): "
                   "any steps, each as `export` writes it (the scenario's layout)")
    c.add_argument("--json", action="store_true", help="print one JSON object (scenario, matching, given, first, "
                   "cause) for graders")
    run_options(c)


def cmd_check(args) -> int:
    from tracer.arithmetic import parse_set
    from tracer.check import check
    result = check(args.scenario, args.answers, args.arithmetic, **parse_set(args.set))
    print(json.dumps(result.json(), ensure_ascii=False) if args.json else result.report())
    return 0 if result.ok else 1
