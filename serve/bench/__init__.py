"""Serving benchmarks and probes, never imported by the server: ``python -m serve.bench`` (throughput and
latency vs the no-model ceiling), ``serve.bench.scale``, ``serve.bench.soak``, ``serve.bench.score``, and
``serve.bench.ceiling_server`` (a LitServe server with no model)."""
