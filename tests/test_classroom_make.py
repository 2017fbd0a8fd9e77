"""`attnsim class make` refusing what it cannot do, in one line with exit 2 and nothing written
(numbers of students, folders, scenarios that small numbers cannot fill), a class from a file of
one's own, --force, and a failure half-way that leaves no half class behind."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_cli_errors import cli, one_error_line
from tracer.classroom import printing, variants

SMALL = """
name = "mine"
layout = "rows"
mask = "causal"
tokens = ["the", "cat", "sat"]
x = [[1, 0], [0, 1], [1, 1]]
[weights]
q = [[[1, 0], [0, 1]], [[0, 1], [1, 0]]]
k = [[[1, 0], [0, 1]], [[1, 1], [0, 1]]]
v = [[[1, 0], [0, 1]], [[2, 0], [0, 2]]]
"""


@pytest.fixture
def no_pdfs(monkeypatch):
    """The PDFs are tested in test_classroom.py; here they would only cost time."""
    monkeypatch.setattr(printing, "write_pdf", lambda path, pages: Path(path).write_bytes(b"%PDF-"))


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("n", ["0", "-3", "501", "abc", "2.5", ""])
def test_a_number_of_students_outside_1_to_500_is_refused(tmp_path, capsys, n):
    code, out, err = cli(capsys, "class", "make", "by_hand", "--students", n, "-o", str(tmp_path / "c"))
    assert code == 2 and out == ""
    assert one_error_line(err) == f"--students: expected a whole number from 1 to 500, got {n!r}"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("spec, why", [
    ("gpt2_small", "gpt2_small cannot be filled with small numbers: its inputs come from a [random] section"),
    ("gpt3_layer", "gpt3_layer cannot be filled with small numbers: its inputs come from a [random] section"),
    ("induction", "induction cannot be filled with small numbers: it is a layer of a real checkpoint"),
    ("rope", "rope cannot be filled with small numbers: rotary positions turn the queries and keys by cosines"),
    ("residual_norm", "residual_norm cannot be filled with small numbers: a norm divides by a square root"),
])
def test_a_scenario_small_numbers_cannot_fill_is_named(tmp_path, capsys, spec, why):
    code, out, err = cli(capsys, "class", "make", spec, "--students", "3", "-o", str(tmp_path / "c"))
    assert code == 2 and out == ""
    message = one_error_line(err)
    assert message.startswith("SCENARIO: " + why) and "expected a small scenario with by-hand arithmetic" in message
    assert leftovers(tmp_path) == []


def test_too_big_for_a_sheet_unknown_and_square_roots(tmp_path, capsys):
    big = tmp_path / "big.toml"
    big.write_text("x = [" + ", ".join(["[1, 0]"] * 13) + "]\n[weights]\nq = [[1], [0]]\nk = [[1], [0]]\nv = [[1], [0]]\n")
    code, _, err = cli(capsys, "class", "make", str(big), "--students", "2", "-o", str(tmp_path / "c"))
    assert code == 2 and "big cannot be filled with small numbers: 13 tokens and 2 features are more than a sheet " \
                         "filled by hand holds (at most 12 tokens" in one_error_line(err)
    roots = tmp_path / "roots.toml"
    roots.write_text(SMALL + '[defaults]\nscale = "sqrt"\n')
    code, _, err = cli(capsys, "class", "make", str(roots), "--students", "2", "-o", str(tmp_path / "c"))
    assert code == 2 and "mine cannot be filled with small numbers: its arithmetic ([defaults]) takes square " \
                         "roots" in one_error_line(err)
    code, _, err = cli(capsys, "class", "make", "by_hnad", "--students", "2", "-o", str(tmp_path / "c"))
    assert code == 2 and one_error_line(err).startswith("scenario: 'by_hnad' is neither a .toml file nor a built-in")
    assert sorted(leftovers(tmp_path)) == ["big.toml", "roots.toml"]


def test_when_no_sheet_can_be_found_it_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(variants, "LARGEST", 0)     # nothing is small enough
    monkeypatch.setattr(variants, "TRIES", 20)
    code, _, err = cli(capsys, "class", "make", "by_hand", "--students", "2", "-o", str(tmp_path / "c"))
    assert code == 2 and one_error_line(err).startswith("SCENARIO: by_hand cannot be filled with small numbers: 20 "
                                                        "tries found no sheet for student 1")
    assert leftovers(tmp_path) == []


def test_a_folder_that_holds_something_is_kept_unless_forced_and_a_class(tmp_path, capsys, no_pdfs):
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    for extra in ([], ["--force"]):
        code, _, err = cli(capsys, "class", "make", "by_hand", "--students", "2", "-o", str(folder), *extra)
        assert code == 2 and leftovers(folder) == ["notes.txt"]
    assert one_error_line(err) == f"--force: {folder} holds files but no class (key.json); expected a folder made by " \
                                  "attnsim class make: --force replaces a class, nothing else"
    (folder / "notes.txt").unlink()
    code, out, _ = cli(capsys, "class", "make", "by_hand", "--students", "2", "--seed", "5", "-o", str(folder))
    assert code == 0 and out.startswith(f"wrote {folder}: 2 sheets of by_hand (s01 … s02: .pdf, .md, .toml and .csv")
    assert out.rstrip().endswith("seed 5 (--seed 5 makes the same class again)")
    code, _, err = cli(capsys, "class", "make", "by_hand", "--students", "3", "-o", str(folder))
    assert code == 2 and one_error_line(err) == f"-o: {folder} exists and is not empty; expected a new or empty " \
                                                "folder (or --force to replace a class made there before)"
    code, _, _ = cli(capsys, "class", "make", "gpt_causal", "--students", "3", "-o", str(folder), "--force")
    assert code == 0 and "s03.toml" in leftovers(folder)
    assert json.loads((folder / "key.json").read_text())["scenario"] == "gpt_causal"
    assert leftovers(tmp_path) == ["c"]   # nothing hidden left beside it
    (tmp_path / "file").write_text("")
    code, _, err = cli(capsys, "class", "make", "by_hand", "--students", "2", "-o", str(tmp_path / "file"))
    assert code == 2 and one_error_line(err).endswith("is a file; expected a folder for the class (new or empty)")
    code, _, err = cli(capsys, "class", "make", "by_hand", "--students", "2", "-o", str(tmp_path / "no" / "c"))
    assert code == 2 and "does not exist" in one_error_line(err)
    code, _, err = cli(capsys, "class", "make", "by_hand", "--students", "2", "--seed", "-1", "-o", str(tmp_path / "d"))
    assert code == 2 and one_error_line(err) == "--seed: expected a whole number ≥ 0, got '-1'"


def test_an_empty_folder_takes_a_class_and_a_class_from_a_file_keeps_its_fields(tmp_path, capsys, no_pdfs):
    (tmp_path / "mine.toml").write_text(SMALL)
    (tmp_path / "c").mkdir()
    code, _, _ = cli(capsys, "class", "make", str(tmp_path / "mine.toml"), "--students", "2", "-o", str(tmp_path / "c"))
    assert code == 0
    import tomllib
    doc = tomllib.loads((tmp_path / "c" / "s02.toml").read_text())
    assert (doc["name"], doc["mask"], doc["tokens"], doc["arithmetic"]) == ("mine-s02", "causal", ["the", "cat", "sat"],
                                                                            "by-hand")
    original = tomllib.loads(SMALL)   # a student may keep one matrix of it, never all the inputs
    assert len(doc["weights"]["q"]) == 2
    assert (doc["x"], doc["weights"]) != (original["x"], original["weights"])


def test_a_failure_half_way_leaves_no_half_class_and_the_old_one_whole(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "c"
    monkeypatch.setattr(printing, "write_pdf", lambda path, pages: Path(path).write_bytes(b"%PDF-"))
    assert cli(capsys, "class", "make", "by_hand", "--students", "2", "--seed", "1", "-o", str(folder))[0] == 0
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    written = []

    def fail_later(path, pages):
        written.append(path)
        if len(written) == 3:
            raise OSError(28, "No space left on device")
        Path(path).write_bytes(b"%PDF-")
    monkeypatch.setattr(printing, "write_pdf", fail_later)
    code, _, err = cli(capsys, "class", "make", "by_hand", "--students", "4", "-o", str(folder), "--force")
    assert code == 2 and one_error_line(err).startswith(f"-o: cannot write {folder} (No space left on device)")
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    written.clear()
    code, _, _ = cli(capsys, "class", "make", "by_hand", "--students", "4", "-o", str(tmp_path / "new"))
    assert code == 2 and leftovers(tmp_path) == ["c"]


def test_a_failed_make_stops_its_key_writer_before_the_half_made_folder_goes(tmp_path, capsys, monkeypatch):
    """key.pdf is written by a forked copy of the process; when a student's sheet fails, that copy is
    stopped and waited for before the half-made folder is removed. (Not waited for, it went on
    writing into the folder being removed: a loaded machine once kept a hidden .partial folder.)"""
    import multiprocessing
    import os
    import signal
    import time
    if (os.cpu_count() or 1) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("the key is written by a forked copy only where there is fork and a second core")

    writing = tmp_path / "key being written"

    def write(path, pages):
        if Path(path).name == "key.pdf":   # the forked copy: slow, and deaf to SIGTERM until it has written
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
            writing.touch()
            time.sleep(0.5)
            Path(path).write_bytes(b"%PDF-")
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        elif Path(path).name == "s02.pdf":   # fails while the key is being written
            for _ in range(500):
                if writing.exists():
                    break
                time.sleep(0.01)
            raise OSError(28, "No space left on device")
        else:
            Path(path).write_bytes(b"%PDF-")
    monkeypatch.setattr(printing, "write_pdf", write)
    code, _, _ = cli(capsys, "class", "make", "by_hand", "--students", "3", "-o", str(tmp_path / "new"))
    assert code == 2 and multiprocessing.active_children() == []
    assert leftovers(tmp_path) == ["key being written"]


# ---------------------------------------------------------------- what --force may replace, and races

def tree(folder: Path) -> dict[str, bytes]:
    """Every file under FOLDER (hidden ones too) by its path inside it, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def sheets_of(n: int) -> set[str]:
    ids = [f"s{i:02d}" for i in range(1, n + 1)]
    return {f"{sid}{ext}" for sid in ids for ext in (".pdf", ".md", ".toml", ".csv")} | {"key.json", "key.pdf"}


def test_force_replaces_only_the_files_of_the_earlier_class(tmp_path, capsys, no_pdfs):
    folder = tmp_path / "c"
    assert cli(capsys, "class", "make", "by_hand", "--students", "3", "--seed", "1", "-o", str(folder))[0] == 0
    (folder / "returned").mkdir()
    (folder / "returned" / "s01-ana.csv").write_text("step,row,col,value\n")
    (folder / "grades.csv").write_text("student,file,right\ns01,s01-ana.csv,3\n")
    (folder / "thesis.odt").write_bytes(b"a user's own document")
    (folder / "s01-notes.md").write_text("not a class file: the name only starts like one")
    mine = {name: data for name, data in tree(folder).items() if name not in sheets_of(3)}
    code, out, _ = cli(capsys, "class", "make", "gpt_causal", "--students", "2", "--seed", "4", "-o", str(folder),
                       "--force")
    assert code == 0 and out.startswith(f"wrote {folder}: 2 sheets of gpt_causal")
    after = tree(folder)
    assert set(after) == sheets_of(2) | set(mine)                      # s03's files went with their class
    assert {name: after[name] for name in mine} == mine                 # everything else as it was
    assert json.loads(after["key.json"])["scenario"] == "gpt_causal"
    assert leftovers(tmp_path) == ["c"]


def test_force_refuses_a_name_the_class_needs_that_the_earlier_one_did_not_write(tmp_path, capsys, no_pdfs):
    folder = tmp_path / "c"
    assert cli(capsys, "class", "make", "by_hand", "--students", "2", "-o", str(folder))[0] == 0
    (folder / "s03.md").write_text("my notes on student three")
    (folder / "s01.csv").unlink()
    (folder / "s01.csv").mkdir()                                       # a folder where a sheet was
    before = tree(folder)
    code, out, err = cli(capsys, "class", "make", "by_hand", "--students", "3", "-o", str(folder), "--force")
    assert code == 2 and out == ""
    assert one_error_line(err) == f"--force: {folder / 's01.csv'} is not a file of the class made there before; " \
                                  "expected only the earlier class's files where the new one writes its own (move " \
                                  "it away first)"
    (folder / "s01.csv").rmdir()
    code, _, err = cli(capsys, "class", "make", "by_hand", "--students", "3", "-o", str(folder), "--force")
    assert code == 2 and one_error_line(err).startswith(f"--force: {folder / 's03.md'} is not a file of the class")
    assert tree(folder) == {k: v for k, v in before.items()} and leftovers(tmp_path) == ["c"]


def test_a_key_that_only_claims_the_schema_never_takes_the_folder_with_it(tmp_path, capsys, no_pdfs):
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "key.json").write_text('{"schema": "attnsim.class/1", "students": [{"id": "../../x"}, {"id": "/"}]}')
    (folder / "report.docx").write_bytes(b"a user's own document")
    (folder / "data").mkdir()
    (folder / "data" / "x.csv").write_text("1,2\n")
    code, _, _ = cli(capsys, "class", "make", "by_hand", "--students", "2", "--seed", "2", "-o", str(folder), "--force")
    assert code == 0
    after = tree(folder)
    assert after["report.docx"] == b"a user's own document" and after["data/x.csv"] == b"1,2\n"
    assert set(after) == sheets_of(2) | {"report.docx", "data/x.csv"}


def test_the_current_folder_takes_a_class_and_nothing_hidden_is_left(tmp_path, capsys, no_pdfs, monkeypatch):
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    code, out, err = cli(capsys, "class", "make", "by_hand", "--students", "2", "-o", ".")
    assert code == 0 and err == "" and out.startswith("wrote .: 2 sheets of by_hand")
    assert set(tree(here)) == sheets_of(2) and leftovers(tmp_path) == ["here"]
    code, _, err = cli(capsys, "class", "make", "by_hand", "--students", "2", "-o", ".")
    assert code == 2 and "exists and is not empty" in one_error_line(err)
    code, _, _ = cli(capsys, "class", "make", "gpt_causal", "--students", "3", "-o", ".", "--force")
    assert code == 0 and set(tree(here)) == sheets_of(3) and leftovers(tmp_path) == ["here"]


@pytest.mark.parametrize("existing", [False, True], ids=["new folder", "empty folder"])
def test_three_makes_into_one_folder_one_wins_and_nothing_of_anyone_is_removed(tmp_path, no_pdfs, monkeypatch,
                                                                               existing):
    """Three threads, each held once its class is built (every check passed) until all three are:
    then each puts its class in place. One may; the others are refused, and remove only their own."""
    import threading
    from tracer.classroom import make
    from tracer.errors import ScenarioError
    folder = tmp_path / "c"
    if existing:
        folder.mkdir()
    built = threading.Barrier(3, timeout=120)
    real = make._write_pdfs
    monkeypatch.setattr(make, "_write_pdfs", lambda tmp, sheets: (real(tmp, sheets), built.wait()))
    results = {}

    def one(seed):
        try:
            results[seed] = make.make_class("by_hand", 1, folder, seed=seed)
        except ScenarioError as err:
            results[seed] = err
    threads = [threading.Thread(target=one, args=(seed,)) for seed in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [seed for seed, r in results.items() if not isinstance(r, Exception)]
    assert len(won) == 1, results
    for seed, r in results.items():
        if seed not in won:
            assert str(r).startswith(f"-o: {folder}") and "nothing was written" in str(r), r
    assert set(tree(folder)) == sheets_of(1) and json.loads((folder / "key.json").read_text())["seed"] == won[0]
    assert leftovers(tmp_path) == ["c"]


def test_three_processes_make_one_class(tmp_path):
    """The same race between processes, as three teachers' terminals would run it."""
    import subprocess
    import sys
    folder = tmp_path / "c"
    runs = [subprocess.Popen([sys.executable, "-m", "tui", "class", "make", "by_hand", "--students", "2", "--seed",
                              str(seed), "-o", str(folder)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for seed in (1, 2, 3)]
    done = [(run.wait(timeout=300), *run.communicate()) for run in runs]
    winners = [out for code, out, _ in done if code == 0]
    assert len(winners) == 1 and winners[0].startswith(f"wrote {folder}: 2 sheets"), done
    for code, out, err in done:
        if code != 0:
            assert code == 2 and out == "" and one_error_line(err).startswith(f"-o: {folder}"), err
    seed = json.loads((folder / "key.json").read_text())["seed"]
    assert winners[0].rstrip().endswith(f"seed {seed} (--seed {seed} makes the same class again)")
    assert set(tree(folder)) == sheets_of(2) and leftovers(tmp_path) == ["c"]


def test_a_students_sheet_says_its_lesson_quotes_the_originals_numbers(tmp_path, capsys, no_pdfs):
    """by_hand's lesson works its own numbers ("q of sat is …"); a student's sheet holds other
    numbers, so its lesson says whose numbers it quotes, before it quotes them."""
    import tomllib
    import tracer
    code, _, _ = cli(capsys, "class", "make", "by_hand", "--students", "2", "-o", str(tmp_path / "c"))
    assert code == 0
    lesson = tracer.load_scenario("by_hand").description
    for sid in ("s01", "s02"):
        doc = tomllib.loads((tmp_path / "c" / f"{sid}.toml").read_text(encoding="utf-8"))
        assert doc["description"].startswith("The lesson below works the original exercise's numbers")
        assert doc["description"].strip().endswith(lesson.strip()[-40:])
        sheet = (tmp_path / "c" / f"{sid}.md").read_text(encoding="utf-8")
        assert "your answers differ from the numbers it quotes" in sheet
