"""The closed vocabulary of steps (CONTRACT §4): one module per family of kinds, each kind
declared once with all the system needs to know about it (see base.Kind). The kinds of today's
mechanisms live in their mechanism's module (tracer/mechanisms), each registered after the kind it
follows in the computation."""
from . import inputs, scores, softmax, online, decode, output  # noqa: F401  (registration order = computation order)
from .. import mechanisms  # noqa: F401,E402  (their kinds, each after its neighbour: a capped score is then biased)
from .base import KINDS, SCOPES, Context, Dims, Kind, Step
from .cell import Cell

KIND_ORDER = tuple(KINDS)

__all__ = ["KINDS", "KIND_ORDER", "SCOPES", "Cell", "Context", "Dims", "Kind", "Step"]
