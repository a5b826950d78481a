"""The Grafana dashboard of relserve, written as data: ``python -m loadtest.dashboard`` regenerates the JSON.

Every panel's PromQL lives here once; ``loadtest/grafana/relserve-dashboard.json`` is its output
(a test checks the two agree, and that every expression returns data from a real server through
a real Prometheus). Panels reference the datasource variable ``${DS_PROMETHEUS}``, so the file
imports through the UI, the HTTP API or file provisioning alike.

Queries that count rare events (5xx, rejections) add ``or <traffic> * 0`` so that they show 0
rather than "no data" while nothing goes wrong.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DASHBOARD_PATH = Path(__file__).parent / "grafana" / "relserve-dashboard.json"
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
RATE = "[$__rate_interval]"
TASK = 'task=~"$task"'
SCHEMA_VERSION = 39


def rate(metric: str, selector: str = TASK, by: str = "task") -> str:
    return f"sum by ({by}) (rate({metric}{{{selector}}}{RATE}))"


def quantile(q: float, histogram: str, selector: str = TASK, by: str = "task") -> str:
    return f"histogram_quantile({q}, {rate(histogram + '_bucket', selector, by + ', le')})"


def mean(histogram: str, by: str = "task") -> str:
    return f"{rate(histogram + '_sum', by=by)} / {rate(histogram + '_count', by=by)}"


def zero_filled(expr: str) -> str:
    """``expr``, or 0 per task while the counted event has never happened."""
    return f"(({expr}) or ({rate('relserve_requests_total')} * 0))"


REQUESTS = rate("relserve_requests_total")




def error_ratio(status_class: str) -> str:
    """Share of a task's answers whose status is ``status_class`` (``"4"`` or ``"5"``) + ``xx``."""
    errors = rate("relserve_requests_total", f'{TASK},status=~"{status_class}.."')
    return f"{zero_filled(errors)} / {REQUESTS}"


@dataclass(frozen=True)
class Panel:
    """One panel: title, what it shows (the README repeats it), unit and ``(expr, legend)`` queries.

    Args:
        kind: Grafana panel type, ``timeseries`` or ``stat``.
        width: of 24 grid columns.
        red_from: a stat panel turns red from this value on.
    """

    title: str
    description: str
    unit: str
    queries: tuple[tuple[str, str], ...]
    kind: str = "timeseries"
    width: int = 12
    red_from: float | None = None

    @property
    def height(self) -> int:
        return 8 if self.kind == "timeseries" else 5


TRAFFIC = (
    Panel("Request rate per task", "Answered prediction requests per second, any status.", "reqps",
          ((REQUESTS, "{{task}}"),)),
    Panel("Responses by status", "Requests per second by task and HTTP status (200, 404, 415, 422, 503, "
          "504).", "reqps", ((rate("relserve_requests_total", by="task, status"), "{{task}} {{status}}"),)),
    Panel("Error ratio per task", "Share of answers that are server errors (5xx) and client errors "
          "(4xx).", "percentunit", ((error_ratio("5"), "5xx {{task}}"), (error_ratio("4"), "4xx {{task}}"))),
    Panel("Rejected requests", "Requests refused without running them: overloaded (in-flight bound), "
          "draining (shutdown) or deadline (no answer in time).", "reqps",
          ((zero_filled(rate("relserve_rejected_total", by="task, reason")), "{{task}} {{reason}}"),)),
    Panel("In flight and queued", "Admitted requests not yet answered, and those waiting for a worker.",
          "short", (('sum by (task) (relserve_inflight_requests{task=~"$task"})', "in flight {{task}}"),
                    ('sum by (task) (relserve_queue_depth{task=~"$task"})', "queued {{task}}")), width=24),
)
LATENCY = (
    Panel("Latency p50 / p95 / p99 per task", "Time from request to answer of successful (200) "
          "predictions, from the request-duration histogram.", "s",
          tuple((quantile(q, "relserve_request_duration_seconds", TASK + ',status="200"'),
                 f"p{round(q * 100)} {{{{task}}}}") for q in (0.5, 0.95, 0.99))),
    Panel("Stage durations per batch", "Mean and p95 time per inference batch in each stage: sample "
          "(temporal neighbours + features), forward (padded, compiled model), rank (head / top-k).", "s",
          ((mean("relserve_stage_duration_seconds", "task, stage"), "mean {{task}} {{stage}}"),
           (quantile(0.95, "relserve_stage_duration_seconds", by="task, stage"), "p95 {{task}} {{stage}}"))),
)
BATCHING = (
    Panel("Batch size", "Requests per inference batch: mean and p95 (1 means no batching happened).",
          "short", ((mean("relserve_batch_size"), "mean {{task}}"),
                    (quantile(0.95, "relserve_batch_size"), "p95 {{task}}")), width=8),
    Panel("Bucket usage", "Batches per second by static shape bucket: which compiled graphs serve.",
          "ops", ((rate("relserve_bucket_total", by="task, bucket"), "{{task}} {{bucket}}"),), width=8),
    Panel("Padding ratio", "Share of a bucket's node rows that are padding: the compute bought for "
          "static shapes (mean and p95).", "percentunit",
          ((mean("relserve_padding_ratio"), "mean {{task}}"),
           (quantile(0.95, "relserve_padding_ratio"), "p95 {{task}}")), width=8),
    Panel("Recompiles after warm-up", "Graphs compiled after warm-up; above 0 means a batch fell "
          "outside the bucket ladder and paid a compile in the request path.", "short",
          (('sum by (task) (relserve_recompiles_total{task=~"$task"})', "{{task}}"),), "stat", 8, 1),
    Panel("Warm-up seconds", "setup() time of the slowest worker per task: bundle load, compile (or "
          "compile-cache load) and one run of every bucket, before /health turns 200.", "s",
          (('max by (task) (relserve_warmup_seconds{task=~"$task"})', "{{task}}"),), "stat", 8),
    Panel("Compile cache at start-up", "Worker start-ups by compile-cache outcome (hit, miss, disabled).",
          "short", (('sum by (task, result) (relserve_compile_cache_total{task=~"$task"})',
                     "{{task}} {{result}}"),), "stat", 8),
)
KIND = 'kind=~".*"'
INGESTION = (
    Panel("Rows ingested", "Rows acknowledged per second (durable in the ingestion log), by table.",
          "short", ((rate("relserve_ingest_rows_total", KIND, "kind"), "{{kind}}"),), width=8),
    Panel("Rejected rows by reason", "Rows of refused batches per second, by the reason of the batch's "
          "first problem (invalid, unknown_id, exists, late, future, too_large, key_conflict).", "short",
          ((rate("relserve_ingest_rejected_rows_total", KIND, "kind, reason"), "{{kind}} {{reason}}"),),
          width=8),
    Panel("Ingest-to-visible lag p50 / p99", "From a batch's receipt to the task's workers answering "
          "from a graph that holds it (target: p99 under 1 s), and for purchase to article keys that "
          "cover it (refreshed on their own pacing, --key-share).", "s",
          tuple((quantile(q, "relserve_ingest_visible_lag_seconds"), f"p{round(q * 100)} {{{{task}}}}")
                for q in (0.5, 0.99))
          + tuple((quantile(q, "relserve_article_keys_lag_seconds"), f"keys p{round(q * 100)} {{{{task}}}}")
                  for q in (0.5, 0.99)), width=8),
    Panel("Log and applied sequence", "The ingestion log's last sequence, and the lowest sequence the "
          "task's live workers serve: a gap that stays open means a worker is behind.", "short",
          (("max(relserve_ingest_log_sequence)", "log"),
           ('min by (task) (relserve_ingest_applied_sequence{task=~"$task"})', "applied {{task}}"),
           ('min by (task) (relserve_ingest_keyed_sequence{task=~"$task"})', "keyed {{task}}")), width=8),
    Panel("Delta size", "Rows (transactions and new nodes) the workers hold in memory on top of the base "
          "snapshot; a compaction folds them into a new version and this drops to 0.", "short",
          (('max by (task) (relserve_ingest_delta_rows{task=~"$task"})', "{{task}}"),), width=8),
    Panel("Article-key refreshes", "Purchase article keys recomputed per second after the graph or the "
          "seed day moved, and the mean time one takes (off the request path).", "short",
          ((rate("relserve_article_key_refreshes_total"), "refreshes/s {{task}}"),
           (mean("relserve_article_key_refresh_seconds"), "seconds {{task}}")), width=8),
    Panel("Snapshot version", "Log sequence held by the compacted snapshot version the workers serve "
          "(0: the artifacts' snapshot).", "short",
          (('min by (task) (relserve_snapshot_version{task=~"$task"})', "{{task}}"),), "stat", 8),
    Panel("Compactions", "Compactions run by the server (--compact-every), and snapshot versions the "
          "workers switched to (python -m training.compact included).", "short",
          (("sum(relserve_compactions_total) or vector(0)", "compactions"),
           ('sum by (task) (relserve_snapshot_switches_total{task=~"$task"})', "switches {{task}}")),
          "stat", 8),
    Panel("Append time p99", "A batch's request from its first byte to its answer: validation and the "
          "durable append (fsync, or the broker's acknowledgement).", "s",
          ((quantile(0.99, "relserve_ingest_append_seconds", KIND, "kind"), "p99 {{kind}}"),), "stat", 8),
)
ROWS = (("Traffic", TRAFFIC), ("Latency", LATENCY), ("Batching and compilation", BATCHING),
        ("Ingestion (with --state-dir)", INGESTION))


def _panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    targets = [{"datasource": DATASOURCE, "expr": expr, "legendFormat": legend, "refId": chr(ord("A") + i),
                "range": True} for i, (expr, legend) in enumerate(panel.queries)]
    body: dict[str, Any] = {
        "id": panel_id, "type": panel.kind, "title": panel.title, "description": panel.description,
        "datasource": DATASOURCE, "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []}, "targets": targets,
    }
    if panel.kind == "timeseries":
        body["fieldConfig"]["defaults"]["custom"] = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10,
                                                     "showPoints": "never"}
        body["options"] = {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                           "tooltip": {"mode": "multi", "sort": "desc"}}
    else:
        body["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                           "colorMode": "value", "graphMode": "none", "textMode": "value_and_name"}
        steps: list[dict[str, Any]] = [{"color": "green", "value": None}]
        if panel.red_from is not None:
            steps.append({"color": "red", "value": panel.red_from})
        body["fieldConfig"]["defaults"]["thresholds"] = {"mode": "absolute", "steps": steps}
    return body


def build_dashboard() -> dict[str, Any]:
    """The dashboard as Grafana's JSON model."""
    panels: list[dict[str, Any]] = []
    y, panel_id = 0, 1
    for row_title, row_panels in ROWS:
        panels.append({"id": panel_id, "type": "row", "title": row_title, "collapsed": False, "panels": [],
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}})
        panel_id, y, x, height = panel_id + 1, y + 1, 0, 0
        for panel in row_panels:
            if x + panel.width > 24:
                x, y, height = 0, y + height, 0
            panels.append(_panel_json(panel, panel_id, x, y))
            panel_id, x, height = panel_id + 1, x + panel.width, max(height, panel.height)
        y += height
    variables = [
        {"name": "DS_PROMETHEUS", "label": "Prometheus", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0, "refresh": 1, "options": [], "regex": ""},
        {"name": "task", "label": "Task", "type": "query", "datasource": DATASOURCE,
         "query": {"query": "label_values(relserve_warmup_seconds, task)", "refId": "task"},
         "definition": "label_values(relserve_warmup_seconds, task)", "refresh": 2, "multi": True,
         "includeAll": True, "allValue": ".*", "current": {"text": "All", "value": "$__all"}, "options": [],
         "sort": 1, "hide": 0, "regex": ""},
    ]
    return {
        "__requires": [{"type": "grafana", "id": "grafana", "name": "Grafana", "version": "10.0.0"},
                       {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"}],
        "uid": "relserve", "title": "relserve",
        "description": "relserve serving: traffic, latency, batching, shape buckets and compilation; "
                       "ingestion when the server runs with --state-dir.",
        "tags": ["relserve", "serving", "gnn"], "editable": True,
        "graphTooltip": 1, "schemaVersion": SCHEMA_VERSION, "version": 1, "refresh": "10s",
        "time": {"from": "now-15m", "to": "now"}, "timepicker": {}, "timezone": "",
        "annotations": {"list": []}, "links": [], "templating": {"list": variables}, "panels": panels,
    }


def render() -> str:
    return json.dumps(build_dashboard(), indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.dashboard", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DASHBOARD_PATH)
    out = parser.parse_args(argv).out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render())
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
