"""Datasets, costs files, synthetic data and the on-disk cache."""
