"""The TUI tests' fixture: scenario files written to a temporary folder (helpers live in
tui_helpers.py, imported by name, so they never clash with the suite's own conftest)."""
import pytest


@pytest.fixture
def scenario_file(tmp_path):
    def write(name: str, text: str) -> str:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return str(path)
    return write
