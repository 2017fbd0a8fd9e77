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
