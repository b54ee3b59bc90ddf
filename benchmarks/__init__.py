"""Reproducible speed and accuracy-cost measurements. Run each as ``python -m benchmarks.<name>``
(script names match the packages they measure, so ``python benchmarks/<name>.py`` would shadow them;
each script also drops its own folder from ``sys.path`` to make that form work too)."""
