"""The house rule on sizes, kept: every module of tracer/ and tui/ at most 350 lines, every function
(and method) at most 60, so that each file has one job and each function can be read at once."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_FILE_LINES, MAX_FUNCTION_LINES = 350, 60


def _modules():
    return sorted(p for package in ("tracer", "tui") for p in (ROOT / package).rglob("*.py"))


def test_every_module_is_at_most_350_lines():
    long = {str(p.relative_to(ROOT)): n for p in _modules()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES}
    assert long == {}


def test_every_function_is_at_most_60_lines():
    long = {}
    for p in _modules():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{p.relative_to(ROOT)}:{node.lineno} {node.name}"] = lines
    assert long == {}


def test_the_rule_is_measured_as_written():
    """The measure itself: a function's lines from its def to its last line, decorators aside."""
    source = "def f():\n" + "    x = 1\n" * 60 + "\n\ndef g():\n    return 1\n"
    sizes = {n.name: n.end_lineno - n.lineno + 1 for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)}
    assert sizes == {"f": 61, "g": 2}
