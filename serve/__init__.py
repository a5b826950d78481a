"""The HTTP server: ``python -m serve`` (LitServe) on a directory of task bundles.

Benchmarks and probes live in :mod:`serve.bench`, batch scoring in :mod:`serve.score`; the server
imports neither (a contract in ``pyproject.toml`` keeps it so).
"""
