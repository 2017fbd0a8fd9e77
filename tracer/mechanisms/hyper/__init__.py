"""Hyper-connections (DeepSeek V4's manifold-constrained mHC): a residual of several streams,
collapsed into the one `x` each attention reads and expanded back after it (`connections`)."""
