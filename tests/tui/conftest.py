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



# Pilot waits for the app to go idle by sleeping in steps of textual._wait.SLEEP_GRANULARITY (20 ms)
# until a step passes with (almost) no CPU used: at least 40 ms per key pressed. Steps of 2 ms, a
# step idle under 0.25 ms of CPU, wait a tenth of that. The app's pending work runs before the
# step's timer fires (one event loop; its threads' CPU counts too), so a shorter step ends no wait
# before the work is done; an idle app and its event loop spend about 0.1 ms a step. An animation
# (a smooth scroll) spends too little CPU per step to count as work, so the apps under test scroll
# at once.
import textual._wait as _wait  # noqa: E402
import textual.constants  # noqa: E402

_wait.SLEEP_GRANULARITY = 0.002
_wait.SLEEP_IDLE = 0.00025
textual.constants.TEXTUAL_ANIMATIONS = "none"
