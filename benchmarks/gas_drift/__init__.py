"""The gas sensor drift study: train on gas batches 1-2, stream the later batches in time
order, raise the drift alarm, recalibrate (``python -m benchmarks.drift``), and the same in the
loop on real brokers (``python -m benchmarks.drift_hil``)."""
