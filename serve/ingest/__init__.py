"""Ingestion: the write side of a fresh graph (``python -m serve --state-dir S``).

Rows arrive over HTTP (:mod:`serve.ingest.routes`) or as files (:mod:`serve.ingest.file_drop`), are
validated against the current graph (:mod:`serve.ingest.validation`, :mod:`serve.ingest.view`) and
appended, as one :class:`models.store.records.IngestBatch`, to an ordered log (:mod:`models.store.log.format`:
the local write-ahead log of :mod:`models.store.log.wal` or a Redis stream, :mod:`models.store.log.redis_log`)
before they are acknowledged. One graph owner per server tails the log and publishes the live graph
the workers read (:mod:`serve.graph`); how far the server serves it is :mod:`serve.ingest.progress`.
docs/ingestion.md describes the HTTP contract and the guarantees.
"""
