"""The README's "Your own code, checked cell by cell" runs as written: its python blocks in order
(one namespace, a folder of their own), each ```text block after one equal to what it printed, and
each `$ attnsim …` of a ```console block printing exactly the lines below it."""
from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from tui.cli import main

pytest.importorskip("torch")
README = Path(__file__).resolve().parent.parent / "README.md"
SECTION = "## Your own code, checked cell by cell"


def blocks() -> list[tuple[str, str]]:
    """(language, text) of each fenced block of the section, in order."""
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return re.findall(r"```(\w+)\n(.*?)```", text[start:end], flags=re.S)


def commands(console: str) -> list[tuple[str, str]]:
    """(command, the output shown below it) of a console block."""
    out = []
    for line in console.splitlines(keepends=True):
        if line.startswith("$ "):
            out.append([line[2:].strip(), ""])
        else:
            out[-1][1] += line
    return [tuple(c) for c in out]


def test_the_course_bridges_run_and_print_what_the_readme_shows(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace, printed, ran = {"__name__": "readme"}, None, 0
    for language, text in blocks():
        if language == "python":
            buffer = io.StringIO()
            with contextlib.redirect_stdout(buffer):
                exec(compile(text, str(README), "exec"), namespace)
            printed = buffer.getvalue()
        elif language == "text":
            assert printed == text, "a python block printed something else than the README shows"
        elif language == "console":
            for command, shown in commands(text):
                argv = shlex.split(command)
                assert argv[0] == "attnsim"
                capsys.readouterr()
                code = main(argv[1:])
                assert (code, capsys.readouterr().out) == (1, shown), command
                ran += 1
    assert ran == 2 and (tmp_path / "cs336.npz").exists() and (tmp_path / "arena.npz").exists()
