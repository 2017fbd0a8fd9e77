"""QK-norm after the rotation (nanochat, Llama 4; `[weights] qk_norm_after_rope = true`): the steps
h{h}.q_norm and k_norm of mechanisms/qk_norm.py, placed after q_rot and k_rot, which then read q and
k themselves. Imported after the rotary steps, so that there is a place to register them."""
from __future__ import annotations

from ...steps.base import register
from ..qk_norm import kinds

_q_kind, _k_kind = kinds(after=True)
register(_q_kind, after="q_rot")
register(_k_kind, after="k_rot")
