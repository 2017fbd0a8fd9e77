"""Shared test set-up: hypothesis settings (no deadline: the first numba call compiles) and
the tests folder on the import path, so that tests can `import reference`."""
import os
import sys

from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(__file__))

settings.register_profile("attnsim", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "attnsim"))
