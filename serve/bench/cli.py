"""What the serving benchmarks' command lines share: their common options, reading the artifacts
they serve, and the ending that writes ``--json``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from models.store.snapshot import GraphSnapshot
from serve.bench.workload import served_mix
from serve.versions.bundles import ArtifactsError, TaskBundle


def add_output_options(parser: argparse.ArgumentParser, server_example: str | None = None) -> None:
    """``--json PATH`` and, with ``server_example``, ``--server-args`` (more ``python -m serve`` options).

    Args:
        parser: the benchmark's parser.
        server_example: options shown as the example of ``--server-args``; ``None``: no such option.
    """
    if server_example is not None:
        parser.add_argument("--server-args", default="",
                            help=f"more python -m serve options, e.g. '{server_example}'")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")


def served_mix_or_exit(parser: argparse.ArgumentParser,
                       artifacts: Path) -> tuple[list[TaskBundle], GraphSnapshot, list[tuple[str, bytes]]]:
    """:func:`serve.bench.workload.served_mix`, or one ``prog: error:`` line and exit 2 when
    ``artifacts`` holds no usable bundle."""
    try:
        return served_mix(artifacts)
    except ArtifactsError as e:
        parser.exit(2, f"{parser.prog}: error: {e}\n")


def finish(summary: Any, json_path: Path | None, passed: bool = True) -> int:
    """Every benchmark's last step: ``summary`` written as JSON to ``json_path`` (when given).

    Args:
        summary: the figures (JSON-serialisable).
        json_path: ``--json``; ``None``: nothing written.
        passed: whether the benchmark's own checks passed.

    Returns:
        The exit status: 0, or 1 when not ``passed``.
    """
    if json_path is not None:
        json_path.write_text(json.dumps(summary, indent=2))
    return 0 if passed else 1
