"""The closed vocabulary of steps (CONTRACT §4): one module per family of kinds, each kind
declared once with all the system needs to know about it (see base.Kind)."""
from . import inputs, rope, scores, softmax, online, decode, output  # noqa: F401  (registration order = computation order)
# today's mechanisms: each module says after which kind its step sits (a capped score is then biased)
from . import qk_norm, softcap, alibi, out_norm, sinks, latent  # noqa: F401,E402
from .base import KINDS, SCOPES, Context, Dims, Kind, Step
from .cell import Cell

KIND_ORDER = tuple(KINDS)

__all__ = ["KINDS", "KIND_ORDER", "SCOPES", "Cell", "Context", "Dims", "Kind", "Step"]
