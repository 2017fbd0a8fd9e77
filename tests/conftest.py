"""Shared test set-up: hypothesis settings (no deadline: the first numba call compiles) and
the tests folder on the import path, so that tests can `import reference`."""
import gc
import os
import sys

from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(__file__))

settings.register_profile("attnsim", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "attnsim"))


import pytest  # noqa: E402


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker more than the cores, so that one core never idles while a worker waits
    (for a Pilot app to go idle, a subprocess, a browser); this measured 12 % quicker on 2 cores.
    PYTEST_XDIST_AUTO_NUM_WORKERS, when set, still decides."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores + 1


def pytest_configure(config):
    """Before the suite fans out to its workers, one process starts compiling every kernel: each
    worker would otherwise compile them again, all at once and into the same cache files."""
    if getattr(config.option, "numprocesses", 0) and not hasattr(config, "workerinput") \
            and not config.option.collectonly:
        from tracer.kernels import warm
        warm.compile_in_background()


def pytest_collection_finish(session):
    """A worker collects while the kernels compile, then waits for them before its first test."""
    if hasattr(session.config, "workerinput"):
        from tracer.kernels import warm
        warm.wait()


@pytest.fixture(autouse=True)
def _kernels_compile_in_the_foreground():
    """A CLI run in this process turns on the cold-cache NumPy fallback (kernels/warm.py): switched
    back off after each test, so that which engine a later test gets never depends on test order."""
    yield
    from tracer.kernels import warm
    warm._state.pop("enabled", None)


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory):
    """checkpoint(family) → (folder, float64 transformers model): a tiny checkpoint of the family
    (tests/tiny_checkpoints.py), made the first time any test of the session asks for it."""
    made = {}

    def get(family: str):
        if family not in made:
            import tiny_checkpoints as tc
            folder = tmp_path_factory.mktemp(family)
            made[family] = folder, tc.build(family, folder, seed=11 + len(made))
        return made[family]
    return get


@pytest.fixture(autouse=True)
def _set_aside_what_lives_on():
    """Each test starts with the garbage of the tests before it collected and what is still alive
    (imported modules, caches, a module's fixtures) set aside (gc.freeze): the collector's full
    passes then walk what this test made, not the worker's whole life, which grows past a million
    objects (torch, transformers, textual, numba), and took an eighth of the suite's time. Only the
    living are set aside (what later dies in a cycle stays: a worker's peak memory measured the same)."""
    gc.collect()
    gc.freeze()
    yield
