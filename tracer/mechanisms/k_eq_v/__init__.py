"""K = V (Gemma 4's global layers, `attention_k_eq_v`; `[weights] v = "k"` with `v_norm`): the
values are taken from the keys' projection, before the keys are normed and turned. formula.py."""
