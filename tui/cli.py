"""The `attnsim` command line (CONTRACT §1, §11, §14, §19, §20): list, show, export, diff, validate, tui, serve,
quiz, class, check, model.
(The benchmarks are not a verb: they live in the source checkout, `python -m bench`.)

Bad input of any kind ends with exactly one `attnsim: error: …` line on stderr and exit code 2;
textual is imported only by the `tui` verb, so scripted runs start fast.
"""
from __future__ import annotations

import argparse
import sys
import warnings

from tracer.errors import ScenarioError

from .check_verb import check_parser, cmd_check
from .class_verb import class_parser, cmd_class
from .model_verb import cmd_model, model_parser
from .output_verbs import cmd_diff, cmd_export, cmd_show
from .verbs import PROG, run as _run, scenario as _scenario



class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, as for any other bad input
        raise ScenarioError("arguments", message)


def _run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--arithmetic", metavar="PRESET", help="exact or by-hand (default: the scenario's own)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="change one arithmetic key: scale, softmax_base, normalize, stable, dtype, mask, layout, "
                        "algorithm, block")


def _model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", metavar="PATH", help="a checkpoint folder or model name, instead of SCENARIO")
    p.add_argument("--text", metavar="TEXT", help="with --model or a model built-in (induction): the text the model reads")
    p.add_argument("--layer", type=int, metavar="L",
                   help="with --model (default 0) or a model built-in (default its own): the layer to trace")


SCENARIO_HELP = "a built-in name (attnsim list) or a .toml path"
STEP_HELP = "a step id such as h0.weights (repeatable; default every step)"
INDEX_HELP = ("Rows, columns, heads and layers are counted from 0 (ROW 0 is the first row as `show` prints it); "
              "explanations name tokens, adding #i (also from 0) where a name repeats.")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("attnsim")
    except PackageNotFoundError:  # run from a source checkout that was never installed
        return "unknown (not installed)"


def _output_parsers(sub) -> None:
    """show and export: the verbs that print or write a trace."""
    s = sub.add_parser("show", help="print steps as plain-text tables", epilog=INDEX_HELP)
    s.add_argument("scenario", nargs="?", help=SCENARIO_HELP)
    s.add_argument("--step", action="append", metavar="ID", help=STEP_HELP)
    s.add_argument("--given", action="store_true",
                   help="print the given matrices (x, every weight and bias), then only the steps --step names")
    s.add_argument("--decimals", action="store_true", help="decimals instead of exact fractions")
    s.add_argument("--full", action="store_true", help="print every row and column of large steps")
    s.add_argument("--explain", nargs=3, metavar=("ID", "ROW", "COL"), help="how one cell was computed; ROW and COL count from 0, as the table prints them")
    _run_options(s)
    _model_options(s)
    e = sub.add_parser("export", help="write the trace as json, npz, csv or md, or a picture (svg, png)")
    e.add_argument("scenario", nargs="?", help=SCENARIO_HELP)
    e.add_argument("-o", "--output", required=True, metavar="PATH",
                   help="the file to write; its extension names the format unless --format is given")
    e.add_argument("--format", choices=None, metavar="F", help="json, npz, csv, md, svg or png (default: from PATH)")
    e.add_argument("--step", action="append", metavar="ID", help=STEP_HELP)
    e.add_argument("--figure", metavar="KIND", help="svg/png: heatmap (default), worksheet, lines, or model "
                   "(every layer and head of --model)")
    e.add_argument("--blank", action="store_true", help="md or worksheet: leave computed cells empty")
    _run_options(e)
    _model_options(e)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Step through scaled dot-product self-attention.", epilog=INDEX_HELP)
    p.add_argument("--version", action="version", version=f"{PROG} {_version()}")
    sub = p.add_subparsers(dest="verb", parser_class=_Parser)
    t = sub.add_parser("tui", help="open the terminal UI (the default)")
    t.add_argument("scenario", nargs="?", help=SCENARIO_HELP + " (default by_hand)")
    _run_options(t)
    _model_options(t)
    z = sub.add_parser("quiz", help="the terminal UI with the computed cells hidden, to be typed in")
    z.add_argument("scenario", nargs="?", help=SCENARIO_HELP + " (default by_hand)")
    z.add_argument("--step", action="append", metavar="ID", help="a step to ask (repeatable; default every computed step)")
    z.add_argument("--save", metavar="FILE", help="save the answers to FILE as they are typed; the same FILE again "
                   "resumes them (attnsim class grade marks it)")
    _run_options(z)
    _model_options(z)
    sub.add_parser("list", help="the built-in scenarios")
    _output_parsers(sub)
    d = sub.add_parser("diff", help="compare two arithmetics step by step")
    d.add_argument("scenario", nargs="?", help=SCENARIO_HELP)
    d.add_argument("--a", default="exact", metavar="PRESET", help="the first arithmetic preset (default exact)")
    d.add_argument("--b", default="by-hand", metavar="PRESET", help="the second arithmetic preset (default by-hand)")
    d.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="change one arithmetic key under both a and b (hold it equal), e.g. stable=true")
    d.add_argument("--set-a", action="append", default=[], metavar="KEY=VALUE", help="change a key under a only")
    d.add_argument("--set-b", action="append", default=[], metavar="KEY=VALUE",
                   help="change a key under b only, e.g. --a exact --b exact --set-b algorithm=online")
    _model_options(d)
    w = sub.add_parser("serve", help="the terminal UI in a web browser (textual-serve)")
    w.add_argument("scenario", nargs="?", default="by_hand", help=SCENARIO_HELP + " (default by_hand)")
    w.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only); "
                   "an empty one is refused, one other machines can reach needs --expose")
    w.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    w.add_argument("--expose", action="store_true", help="allow a --host other machines can reach: whoever "
                   "reaches it with the printed address (it holds a secret token) runs the app as you, "
                   "over plain HTTP")
    _run_options(w)
    class_parser(sub, _Parser, SCENARIO_HELP)
    check_parser(sub, _run_options, SCENARIO_HELP)
    model_parser(sub)
    v = sub.add_parser("validate", help="check scenario files")
    v.add_argument("files", nargs="+", metavar="FILE", help="scenario files (.toml) to check")
    return p


def _compile_notice() -> None:
    """Says once on stderr that kernels are compiling (seconds, the first time only), or, with a
    cold cache, that NumPy computes while they compile in the background (tracer/kernels/warm.py)."""
    import tracer
    said = []

    def notice(message: str) -> None:
        if not said:
            said.append(message)
            text = ("compiling kernels for this machine (first run only, cached afterwards)…"
                    if message.startswith("compiling") else message)
            print(f"{PROG}: {text}", file=sys.stderr, flush=True)
    tracer.on_compile(notice)


def cmd_list(args) -> int:
    import tracer.scenario as sc
    from tracer.scenario.files import builtin_extras, installed
    for name, text in sc.list_builtins():
        needs = "".join(f"   [needs the {e} extra: pip install 'attnsim[{e}]'"
                        + ("]" if installed(e) else ", not installed]") for e in builtin_extras(name))
        print(f"{name}\t{text}{needs}")
    return 0


def cmd_validate(args) -> int:
    """Every error of each file (one line each), and the warnings a run would give."""
    from tracer.scenario.validate import problems
    failed = 0
    for path in args.files:
        errors, said = problems(path if path.endswith(".toml") or "/" in path else f"./{path}")
        for err in errors:
            print(f"{PROG}: error: {err}", file=sys.stderr)
        for message in said:
            print(f"{PROG}: warning: {path}: {message}", file=sys.stderr)
        failed += bool(errors)
        if not errors:
            print(f"{path}: ok")
    return 2 if failed else 0


def cmd_tui(args) -> int:
    from tracer.arithmetic import parse_set
    from tui.app import run_app
    from tui.serve import end_with_server
    end_with_server()   # a session of `attnsim serve`: it ends when the server does
    overrides = parse_set(args.set)
    run_app(_scenario(args, "by_hand"), args.arithmetic, overrides)
    return 0


def cmd_quiz(args) -> int:
    """The TUI in quiz mode (CONTRACT §12); the steps asked for, and a saved quiz to resume, are
    checked before it opens."""
    from tracer.arithmetic import parse_set
    from tui.app import run_app
    from tui.quiz import quiz_steps
    overrides = parse_set(args.set)
    scenario = _scenario(args, "by_hand")
    if args.step or args.save is not None:   # --save "" is refused, not ignored
        trace = _run(scenario, args.arithmetic, overrides, lazy=True)
        quiz_steps(trace, args.step)
        if args.save is not None:
            from tui.quiz_save import open_saved
            args.save = open_saved(args.save, trace.scenario)
    run_app(scenario, args.arithmetic, overrides, quiz=args.step or [], save=args.save)
    return 0


def cmd_serve(args) -> int:
    from tui.serve import serve
    serve(args.scenario, args.host, args.port, args.arithmetic, args.set, args.expose)
    return 0


def _out_of_memory(err: MemoryError, args) -> str:
    """The message of a failed allocation, naming the scenario when there is one."""
    spec = getattr(args, "scenario", None) or getattr(args, "model", None)
    spec = getattr(spec, "source", None) or getattr(spec, "name", spec)
    what = f" ({str(err).splitlines()[0][:120]})" if str(err) else ""
    return str(ScenarioError("memory", f"an allocation failed{what}; expected smaller sizes or fewer steps (or "
                             "more memory for this process)", spec if isinstance(spec, str) else None))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = None
    try:
        args = parser().parse_args(argv or ["tui"])
        if args.verb is None:
            args = parser().parse_args(["tui", *argv])
        verb = {"list": cmd_list, "show": cmd_show, "export": cmd_export, "diff": cmd_diff,
                "validate": cmd_validate, "tui": cmd_tui, "quiz": cmd_quiz, "serve": cmd_serve,
                "class": cmd_class, "check": cmd_check, "model": cmd_model}[args.verb]
        if args.verb not in ("tui", "quiz"):  # the TUI shows the notice on its status line
            _compile_notice()
        from tracer.kernels import warm
        warm.enable()   # kernels not cached yet: NumPy now, compiled in the background meanwhile
        with warnings.catch_warnings():
            # ours are printed once, as `attnsim: warning`; NumPy's and numba's never reach a user
            # (an inf or NaN they would warn of is reported as an error naming the step)
            warnings.simplefilter("ignore")
            return verb(args)
    except ScenarioError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    except MemoryError as err:  # an allocation the size checks did not foresee: still one line
        print(f"{PROG}: error: {_out_of_memory(err, args)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `attnsim show … | head`
        return 0


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
