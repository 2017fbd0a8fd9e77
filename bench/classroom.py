"""A teacher's class, timed (issue 21): `attnsim class make by_hand --students 30` with its PDFs
(goal ≤ 20 s on 2 cores) and `attnsim class grade` of 30 answer files (goal ≤ 2 s), each as the
teacher runs it (a fresh process), then where a sheet's time goes (one process, phase by phase).

    python -m bench.classroom                  # 30 students
    python -m bench.classroom --students 10
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOALS = {"make": 20.0, "grade": 2.0}


def _run(argv: list[str]) -> float:
    """Wall-clock seconds of `attnsim ARGV` in a fresh process."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tui", *argv], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def _answers(folder: Path, out: Path) -> list[str]:
    """A filled sheet per student: the key's values, every seventh cell as a decimal, every
    thirteenth wrong, every eleventh left empty."""
    key = json.loads((folder / "key.json").read_text(encoding="utf-8"))
    files = []
    for student in key["students"]:
        rows = list(csv.reader((folder / f"{student['id']}.csv").open(encoding="utf-8")))
        for n, row in enumerate(rows[1:]):
            want = student["cells"][row[0]][int(row[1])][int(row[2])]
            row[3] = "" if n % 11 == 0 else "7/3" if n % 13 == 0 else want
        path = out / f"{student['id']}-answers.csv"
        with path.open("w", encoding="utf-8", newline="") as f:
            csv.writer(f).writerows(rows)
        files.append(str(path))
    return files


def phases(students: int, folder: Path) -> dict[str, float]:
    """Seconds of each phase of a class made in this process, the key written here too (no fork),
    so that every phase is counted: searching the numbers, the text files, the sheets, the key."""
    from tracer.classroom import make, printing, variants
    spent: dict[str, float] = defaultdict(float)

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - start
        return wrapper

    def search(*args, **kwargs):   # a generator: time each student's search as it is drawn
        found = variants.variants(*args, **kwargs)
        while True:
            start = time.perf_counter()
            try:
                item = next(found)
            except StopIteration:
                return
            finally:
                spent["search for the numbers"] += time.perf_counter() - start
            yield item

    write_pdf = printing.write_pdf
    originals = (make.variants, make._student, printing.write_pdf, make._fork)
    make.variants, make._fork = search, lambda job: None
    make._student = timed("toml, md and csv", make._student)
    printing.write_pdf = lambda path, pages: timed("key.pdf" if Path(path).name == "key.pdf" else "student pdfs",
                                                   write_pdf)(path, pages)
    try:
        start = time.perf_counter()
        from matplotlib.backends import backend_pdf  # noqa: F401  (loaded once per class, as the first sheet would)
        spent["loading matplotlib"] = time.perf_counter() - start
        make.make_class("by_hand", students, folder, seed=1)
        spent["total"] = time.perf_counter() - start
    finally:
        make.variants, make._student, printing.write_pdf, make._fork = originals
    return dict(spent)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.classroom", description=__doc__.split("\n\n")[0])
    p.add_argument("--students", type=int, default=30)
    args = p.parse_args(argv)
    n = args.students
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        _run(["class", "make", "by_hand", "--students", "1", "--seed", "1", "-o", str(tmp / "warm")])  # caches
        make = _run(["class", "make", "by_hand", "--students", str(n), "--seed", "1", "-o", str(tmp / "class")])
        files = _answers(tmp / "class", tmp)
        grade = _run(["class", "grade", str(tmp / "class"), *files])
        spent = phases(n, tmp / "inside")
    print(f"# a class of {n} on by_hand (load average {load:.1f} before, {os.getloadavg()[0]:.1f} after)\n")
    print("| what | seconds | per student | goal |")
    print("| --- | --- | --- | --- |")
    print(f"| attnsim class make, PDFs included (fresh process) | {make:.2f} | {make / n:.3f} | ≤ {GOALS['make']:.0f} |")
    print(f"| attnsim class grade, {n} answer files (fresh process) | {grade:.2f} | {grade / n:.3f} | "
          f"≤ {GOALS['grade']:.0f} |")
    print(f"\nWhere a class's time goes (one process, the key not forked off: {spent['total']:.2f} s):\n")
    print("| phase | seconds | per student | share |")
    print("| --- | --- | --- | --- |")
    for name in ("loading matplotlib", "search for the numbers", "toml, md and csv", "student pdfs", "key.pdf"):
        print(f"| {name} | {spent[name]:.2f} | {spent[name] / n:.3f} | {spent[name] / spent['total']:.0%} |")
    ok = make <= GOALS["make"] and grade <= GOALS["grade"]
    print(f"\ngoals {'met' if ok else 'missed'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
