"""Batch scoring: ``python -m serve.score.cli.cli`` writes every entity's prediction to a Parquet file."""

FORMATS = ("csv", "parquet")
"""Output file formats of batch scoring."""
