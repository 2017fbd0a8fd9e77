"""Linear attention: layers that keep a state of d_k × d_v numbers per head instead of a cache that
grows with every token, and never form the n × n weights.

Each token t updates the state S (d_k × d_v) and then reads it with its query:

    decay   S_t = diag(α_t)·S_{t−1} + k_t·v_tᵀ                       (α = 1: plain linear attention)
    delta   S_t = (I − β_t·k_t·k_tᵀ)·α_t·S_{t−1} + β_t·k_t·v_tᵀ      (Gated DeltaNet)
    kda     the delta rule with a decay per key channel, diag(α_t)   (Kimi Delta Attention)
    o_t = S_tᵀ·q_t

With S kept as d_k × d_v (transformers and FLA keep it so), the erasing factor multiplies from the
left; papers that keep Sᵀ (d_v × d_k) write it on the right, S_{t−1}·(I − β·k·kᵀ). The delta rule
first predicts what the decayed state already holds for k_t (Sᵀ·k_t), then writes only β times the
error v_t − Sᵀ·k_t.

The layer is linear in the values, so it implies weights it never builds: o = A·v with A[t, s] the
weight of value s in output t (`formula.implicit`); rows need not sum to 1 and cells can be negative.

formula.py is the arithmetic in plain NumPy (float64, float32, or Python Fractions: rational inputs
give rational states, outputs and weights); gates.py the pieces around it in a real model (the short
convolution, the L2 norm, the gated RMS norm, the output gate, the decay and β of a checkpoint);
footprint.py what a linear layer keeps against a softmax layer's cache. The compiled kernel for
long inputs is tracer/kernels/linear.py.
"""
