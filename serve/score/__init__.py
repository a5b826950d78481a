"""Batch scoring: ``python -m serve.score`` writes every entity's prediction to a CSV or Parquet file."""

FORMATS = ("csv", "parquet")
"""Output file formats of batch scoring."""
