"""attnsim's engine: scaled dot-product self-attention, traced step by step.

    import tracer
    trace = tracer.run("by_hand", arithmetic="by-hand")
    trace["h0.weights"], trace.explain("h0.scores", 1, 2)
"""
from .kernels.cache import on_compile
from .arithmetic import PRESETS, Arithmetic, resolve
from .errors import AttentionWarning, ScenarioError
from .mechanisms.alibi import alibi_slopes
from .models import from_model, from_transformers
from .model_view import model_view
from .check import check   # the functions (their modules, imported first, are tracer/check.py, sdpa.py)
from .sdpa import sdpa
from .scenario import Scenario, builtin_names, from_arrays, list_builtins, load_scenario
from .steps import Step
from .trace import Trace, run
from .layer_output import attention


def figure(trace, path, steps=None, kind: str = "heatmap", blank: bool = False, fmt: str | None = None):
    """Writes a picture of the trace (SVG or PNG, from the extension): kind `heatmap` (each step in
    `steps`), `worksheet` (a head's whole computation) or `lines` (weights as lines). Needs matplotlib."""
    from .figures import write_figure  # matplotlib is loaded only here, when a picture is asked for
    return write_figure(trace, path, steps, kind=kind, blank=blank, fmt=fmt)


__all__ = ["PRESETS", "Arithmetic", "AttentionWarning", "Scenario", "ScenarioError", "Step", "Trace",
           "alibi_slopes", "attention", "check", "builtin_names", "figure", "from_arrays", "from_model", "from_transformers", "list_builtins", "load_scenario",
           "model_view", "on_compile", "resolve", "run", "sdpa"]
