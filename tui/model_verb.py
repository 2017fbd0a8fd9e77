"""The `attnsim model` verb (CONTRACT §20): every layer of a checkpoint on a text, each head's role
scores and circuits, and what the whole model keeps; and `attnsim export … --figure model`, the
same view drawn. The model view's code is imported only when run."""
from __future__ import annotations

import json
import sys

from tracer.errors import ScenarioError, one_line

FLAGS = {"model.path": "MODEL", "model.text": "--text", "context": "--context"}
MODEL_HELP = "a checkpoint folder, a model name, or a model built-in (induction)"


def model_parser(sub) -> None:
    m = sub.add_parser("model", help="the whole model at a glance: each layer's kind and memory, each head's "
                       "role scores (previous, first, duplicate, induction) and circuits")
    m.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    m.add_argument("--text", metavar="TEXT", help="the text the model reads (a built-in: default its own)")
    m.add_argument("--json", action="store_true", help="print one JSON object (layers, cache_bytes, mha_cache_bytes)")
    m.add_argument("--context", type=int, metavar="N", help="the tokens the cache figures count (default: the text's)")


def _opened(model, text, context):
    """The view with its header read, its errors naming the verb's arguments."""
    from tracer.model_view import open_view
    try:
        return open_view(model, text, context=context)
    except ScenarioError as err:
        if err.source is None and err.field in FLAGS:
            raise ScenarioError(FLAGS[err.field], err.expected) from None
        raise


def cmd_model(args) -> int:
    """Prints the view as it is computed (a layer at a time), or all of it as JSON at the end."""
    from tracer.model_view.report import footer, header, layer_block
    view = _opened(args.model, args.text, args.context)
    if args.json:
        for _ in view.compute():
            pass
        print(json.dumps(view.json(), ensure_ascii=False))
        return 0
    print(one_line(header(view)), flush=True)
    for row in view.compute():
        print("\n".join(layer_block(row)), flush=True)
    print("\n" + "\n".join(footer(view)))
    return 0


def export_model(args) -> int:
    """`attnsim export --model PATH --text T --figure model -o model.svg` (or a model built-in as
    SCENARIO): every layer's heads drawn, one tile each."""
    from tracer.figures import picture_format
    if args.model is not None and args.scenario is not None:
        raise ScenarioError("SCENARIO", f"expected either {args.scenario!r} or --model, not both")
    spec = args.model if args.model is not None else args.scenario
    if spec is None:
        raise ScenarioError("--model", "missing; expected --model PATH (or a model built-in) with --figure model")
    for flag, given in (("--layer", args.layer), ("--step", args.step), ("--blank", args.blank or None),
                        ("--arithmetic", args.arithmetic), ("--set", args.set or None)):
        if given is not None:
            raise ScenarioError(flag, "expected none with --figure model (it draws every layer's weights as "
                                "the model computes them)")
    fmt = picture_format(args.output, args.format)
    view = _opened(spec, args.text, None)
    for _ in view.compute():
        pass
    path = view.save(args.output, fmt)
    heads = sorted({row.heads for row in view.layers})
    print(f"wrote {one_line(str(path))}: the model view of {view.name}, {len(view.layers)} layers × "
          f"{'/'.join(map(str, heads))} heads", file=sys.stdout)
    return 0
