"""Every ```text block of the README that starts with `$ attnsim …` is what that command prints today
(the README once showed 0.75 and `one\\query` where the tool printed 3/4 and `sum\\query`).
`python tests/test_readme.py` writes the blocks again from the tool."""
from __future__ import annotations

import contextlib
import io
import re
import shlex
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"```text\n(\$ attnsim [^\n]*)\n(.*?)```", re.S)


def examples(text: str) -> list[tuple[str, str]]:
    """(command line, what the README says it prints) of every such block."""
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(text)]


def printed(command: str) -> str:
    """What `attnsim …` prints on stdout, run in this process; each line without trailing spaces."""
    from tui.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(shlex.split(command)[1:]) == 0, command
    return "".join(line.rstrip() + "\n" for line in out.getvalue().splitlines())


CASES = examples(README.read_text(encoding="utf-8"))


@pytest.mark.parametrize("command, shown", CASES, ids=[c for c, _ in CASES])
def test_the_readme_prints_what_the_tool_prints(command, shown):
    assert shown == printed(command.removeprefix("$ "))


def test_the_readme_has_such_examples():
    commands = [c for c, _ in CASES]
    assert "$ attnsim show by_hand --explain h0.weights 1 0" in commands and len(commands) >= 2


def write() -> None:
    """Each block's output replaced by what the tool prints now."""
    text = README.read_text(encoding="utf-8")
    README.write_text(BLOCK.sub(lambda m: f"```text\n{m.group(1)}\n{printed(m.group(1)[2:])}```", text),
                      encoding="utf-8")


if __name__ == "__main__":
    sys.path.insert(0, str(README.parent))
    write()
