"""Benchmarks of the training side: data loading and sampling (``training.bench.data``), compiled vs eager
(``python -m training.bench``), start-up (``training.bench.start``)."""
