"""The `attnsim class` verb (CONTRACT §14): `make` a class folder of different sheets and the key,
`grade` what comes back. Imports the classroom code only when run."""
from __future__ import annotations

from tracer.errors import ScenarioError, one_line


def class_parser(sub, parser_class, scenario_help: str) -> None:
    """`attnsim class make …` and `attnsim class grade …`."""
    from tracer.classroom import MAX_STUDENTS
    c = sub.add_parser("class", help="a teacher's class: a different sheet for every student, the key, the marks")
    verbs = c.add_subparsers(dest="action", parser_class=parser_class, metavar="{make,grade}",
                             help="make: a class folder; grade: the marks of what came back")
    m = verbs.add_parser("make", help="a folder of sheets (sNN.pdf, .md, .toml, .csv), key.pdf and key.json")
    m.add_argument("scenario", help=scenario_help)
    m.add_argument("--students", required=True, metavar="N", help=f"how many students (1 to {MAX_STUDENTS})")
    m.add_argument("--seed", metavar="S", help="the seed of the numbers (default: a new one, printed); the same "
                   "seed makes the same files")
    m.add_argument("-o", "--output", required=True, metavar="FOLDER", help="a new or empty folder for the class")
    m.add_argument("--force", action="store_true", help="replace a class made in FOLDER before")
    g = verbs.add_parser("grade", help="mark filled answer sheets (sNN.csv), saved quizzes or arrays (sNN.npz, "
                         "as attnsim check reads them); writes grades.csv")
    g.add_argument("folder", metavar="FOLDER", help="the class's folder (attnsim class make -o FOLDER)")
    g.add_argument("answers", nargs="+", metavar="ANSWERS",
                   help="answers files named from the student's id: s07.csv, s07-ana.csv, s07-quiz.json, s07.npz")


def cmd_class(args) -> int:
    """`class make`: a class folder; `class grade`: the marks of what came back (CONTRACT §14)."""
    if args.action == "make":
        from tracer.classroom.make import make_class
        made = make_class(args.scenario, args.students, args.output, seed=_seed(args.seed), force=args.force)
        ids = made.ids
        print(f"wrote {one_line(str(made.folder))}: {len(ids)} sheet{'s' * (len(ids) != 1)} of {one_line(made.scenario)} "
              f"({ids[0]}{' … ' + ids[-1] if len(ids) > 1 else ''}: .pdf, .md, .toml and .csv each), key.pdf and "
              f"key.json; seed {made.seed} (--seed {made.seed} makes the same class again)")
        return 0
    if args.action == "grade":
        from tracer.classroom.grading import grade, report, write_grades
        key, marks = grade(args.folder, args.answers)
        lines = report(key, marks)   # built before grades.csv changes: a failure leaves it as it was
        path = write_grades(args.folder, key, marks)
        print("\n".join(lines))
        print(f"wrote {one_line(str(path))}")
        return 0
    raise ScenarioError("class", "expected make or grade: attnsim class make SCENARIO --students N -o FOLDER, "
                        "or attnsim class grade FOLDER ANSWERS...")


def _seed(text):
    """--seed as a whole number ≥ 0 (None: a new one)."""
    if text is None:
        return None
    try:
        seed = int(text)
    except ValueError:
        seed = -1
    if not 0 <= seed < 2**63:
        raise ScenarioError("--seed", f"expected a whole number ≥ 0, got {text!r}")
    return seed
