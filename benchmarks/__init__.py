"""Reproducible speed and accuracy-cost measurements. Run each from the repository root as
``python -m benchmarks.<name>``; each prints JSON."""
