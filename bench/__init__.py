"""attnsim's benchmarks: the tracer (traced and untraced) against plain NumPy and PyTorch, side by
side in one run, as ratios. `python -m bench --help`; the last table is saved to bench/RESULTS.md."""
