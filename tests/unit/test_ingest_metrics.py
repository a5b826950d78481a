"""serve.ingest.metrics: the write side's series exist at 0 before anything is ingested, so the
dashboard's ingestion panels show 0 instead of "No data" (the server side of it:
tests/integration/test_ingest_server.py)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from models.store.records import KINDS
from serve.ingest.metrics import IngestMetrics
from serve.ingest.problems import REASONS


def test_every_series_with_labels_known_up_front_starts_at_zero() -> None:
    registry = CollectorRegistry()
    IngestMetrics(registry)
    value = registry.get_sample_value
    for kind in KINDS:
        assert value("relserve_ingest_rows_total", {"kind": kind}) == 0
        assert value("relserve_ingest_append_seconds_count", {"kind": kind}) == 0
        assert value("relserve_ingest_append_seconds_bucket", {"kind": kind, "le": "+Inf"}) == 0
        for reason in REASONS:
            assert value("relserve_ingest_rejected_rows_total", {"kind": kind, "reason": reason}) == 0
    assert value("relserve_compactions_total") == 0
    assert value("relserve_compaction_seconds_count") == 0


def test_recorded_events_land_in_their_series() -> None:
    registry = CollectorRegistry()
    metrics = IngestMetrics(registry)
    metrics.accepted("transactions", 5)
    metrics.rejected("customers", "late", 2)
    metrics.answered("transactions", 200, 0.01)
    metrics.answered("customers", 422, 0.02)  # a refusal is counted, not timed
    metrics.compacted(1.5)
    value = registry.get_sample_value
    assert value("relserve_ingest_rows_total", {"kind": "transactions"}) == 5
    assert value("relserve_ingest_rejected_rows_total", {"kind": "customers", "reason": "late"}) == 2
    assert value("relserve_ingest_append_seconds_count", {"kind": "transactions"}) == 1
    assert value("relserve_ingest_append_seconds_count", {"kind": "customers"}) == 0
    assert value("relserve_ingest_requests_total", {"kind": "customers", "status": "422"}) == 1
    assert value("relserve_compactions_total") == 1
