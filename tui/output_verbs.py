"""The verbs that write a trace out: `show` (plain-text tables, the given matrices, one cell's
story), `export` (json, npz, csv, md, svg, png) and `diff` (two arithmetics step by step)."""
from __future__ import annotations

import sys

from tracer.errors import ScenarioError, one_line

from .verbs import traced, warn


def _drawn_cells(args) -> int | None:
    """Every step's cells for a scenario file with a [random] section, from its sizes alone (its
    arrays are not drawn): what a text refusal needs, found in a moment where drawing a GPT-3-size
    layer takes seconds. None for any other scenario, or when --step picks the steps."""
    if args.model is not None or args.step or not isinstance(args.scenario, str) or args.text or args.layer:
        return None
    from tracer.arithmetic import parse_set, resolve
    from tracer.plan.cache import cells
    from tracer.scenario import generated
    from tracer.scenario.files import read_toml, resolve_path
    from tracer.steps import Dims
    data = read_toml(resolve_path(args.scenario))
    if not isinstance(data, dict) or not isinstance(data.get("random"), dict) or "decode" in data:
        return None
    try:
        d = generated.dims(data["random"])
        keys = {**(data.get("defaults") or {}), **parse_set(list(args.set))}
        arithmetic = resolve(args.arithmetic or data.get("arithmetic", "exact"), keys)
    except ScenarioError:
        return None   # the run itself says what is wrong, naming the file
    mask = data.get("mask", "none")
    dims = Dims(n=d["n"], d_model=d["d_model"], heads=d["heads"], d_k=d["d_k"], d_v=d["d_v"],
                d_out=d["d_out"] or d["heads"] * d["d_v"], output=bool(d["d_out"]))
    head, layer = cells(dims, arithmetic, mask if isinstance(mask, str) else "causal")
    return d["heads"] * head + layer


def _refuse_text(cells: int, show: bool, name: str = "") -> None:
    from tracer.export import TEXT_CELLS
    limit = TEXT_CELLS["csv"] if show else TEXT_CELLS.get(name, cells)
    if cells <= limit:
        return
    if show:
        raise ScenarioError("--full", f"printing {cells:,} numbers (about {cells * 12 / 2**30:.1f} GiB of text) is more "
                            "than a text table should hold; expected fewer steps (--step) or an npz export")
    from tracer.export import BYTES_PER_CELL
    raise ScenarioError("--format", f"a {name} export of {cells:,} numbers (about {cells * BYTES_PER_CELL[name] / 2**30:.1f} "
                        "GiB) is more than a text format should hold; expected npz, or fewer steps (--step)")


def cmd_show(args) -> int:
    from tui.tables import given_lines, lesson_text, step_lines
    from tracer.export import selected_steps
    if args.full and not args.given:   # a generated layer too big to print: said before it is drawn
        early = _drawn_cells(args)
        if early is not None:
            _refuse_text(early, show=True)
    trace = traced(args)
    warn(trace)
    if args.explain:
        sid, row, col = args.explain
        try:
            row, col = int(row), int(col)
        except ValueError:
            raise ScenarioError("--explain", f"expected ID ROW COL with whole numbers, got {row!r} {col!r}") from None
        print(trace.explain(sid, row, col, fractions=not args.decimals))
        return 0
    steps = selected_steps(trace, args.step) if args.step or not args.given else []
    sc = trace.scenario
    cells = sum(s.shape[0] * s.shape[1] for s in steps) if args.full else 0
    cells += (sc.x.size + sum(w.size for w in (sc.w_q, sc.w_k, sc.w_v, sc.w_o) if w is not None)
              if args.full and args.given else 0)
    _refuse_text(cells, show=True)   # what export refuses as text is refused here too, before computing
    ar = trace.arithmetic
    layer = f"; layer {sc.model['layer']} of {sc.model['layers']}" if sc.model else ""  # as the heads overview says
    layer += f": {sc.model['kind']}" if sc.model and sc.model.get("kind") else ""
    print(f"{sc.name}: {sc.title}".rstrip(": ") + f"   [arithmetic: {ar.preset}; layout: {trace.layout}{layer}]\n")
    lesson = lesson_text(sc.description)
    if lesson:  # what to look at in these tables
        print(lesson + "\n")
    if sc.linear is not None:   # what a linear layer keeps against a softmax layer's cache (CONTRACT §16)
        from tracer.mechanisms.linear import keeps
        print(f"keeps: {keeps(sc).sentence(sc.n)}\n")
    if args.given:
        from tracer.given_inputs import given
        for n, (name, axes, a) in enumerate(given(trace)):
            sys.stdout.write("\n" if n else "")
            sys.stdout.writelines(line + "\n" for line in given_lines(trace, name, axes, a, not args.decimals, args.full))
        sys.stdout.write("\n" if steps else "")
    for n, step in enumerate(steps):  # line by line: the first rows appear at once, nothing is held whole
        sys.stdout.write("\n" if n else "")
        sys.stdout.writelines(line + "\n" for line in step_lines(trace, step, fractions=not args.decimals,
                                                                 full=args.full))
    return 0


def cmd_export(args) -> int:
    if args.figure == "model":   # the whole model, not one layer's trace (tui/model_verb.py)
        from .model_verb import export_model
        return export_model(args)
    from tracer.export import PICTURES, check_blank, format_for, write_export, written
    name = format_for(args.output, args.format)  # refuse a bad format before computing anything
    check_blank(name, args.blank, args.figure or "heatmap")
    if args.figure is not None:
        if name not in PICTURES:
            raise ScenarioError("--figure", f"expected a picture format (svg or png) with a figure, got {name}")
        from tracer.figures import check_kind
        check_kind(args.figure)
    if name not in PICTURES:   # a generated layer too big for a text format: said before it is drawn
        early = _drawn_cells(args)
        if early is not None:
            _refuse_text(early, show=False, name=name)
    trace = traced(args)
    warn(trace)
    path = write_export(trace, args.output, args.format, args.step, blank=args.blank,
                           figure=args.figure or "heatmap")
    if name in PICTURES:
        from tracer.figures import describe
        print(f"wrote {one_line(str(path))}: {describe(trace, args.step, args.figure or 'heatmap')}")
    else:
        print(f"wrote {one_line(str(path))} ({name}): {written(trace, name, args.step)}")
    return 0


def cmd_diff(args) -> int:
    from tracer.arithmetic import PRESETS
    from tui.tables import diff_table
    for flag, preset in (("--a", args.a), ("--b", args.b)):  # the flag is the culprit, not the file
        if preset not in PRESETS:
            raise ScenarioError(flag, f"expected a preset, {' or '.join(PRESETS)}; got {preset!r}")
    from tracer.scenario import generated
    args.arithmetic = None
    a = traced(args, args.a, args.set_a)
    try:  # the two traces are held at once: twice what one run needs must fit
        generated.refuse_if_too_big(2 * generated.run_bytes(a.scenario.dims(), 8), "diff",
                                    "two runs side by side", a.scenario.n)
    except ScenarioError as err:
        raise err.at(a.scenario.source) if a.scenario.source else err from None
    b = traced(args, args.b, args.set_b)
    name = lambda preset, sets: " ".join([preset, *sets])  # noqa: E731
    print(diff_table(a, b, name(args.a, args.set_a), name(args.b, args.set_b)))
    return 0
