"""QK-norm after the rotation (`qk_norm_after_rope = true`, nanochat and Llama 4): q and k are
turned by their positions first and normed second. formula.py has both orders."""
