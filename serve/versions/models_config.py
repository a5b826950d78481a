"""Model-version settings of ``python -m serve``: pins, repository polling and the guard override."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from models.registry import TASK_NAMES

DEFAULT_POLL_S = 5.0


@dataclass(frozen=True)
class ModelsConfig:
    """How the server picks and changes model versions (docs/model-repository.md).

    Args:
        pins: ``(task, version)`` pairs: serve exactly that version, and do not promote new ones
            found by polling (``--model-version``); the admin route can still load another.
        poll_s: seconds between looks for new versions in the repository (0: never; the admin
            route still loads versions).
        force: the deployment guard only warns, at start-up and for polled versions (``--force``).
    """

    pins: tuple[tuple[str, int], ...] = ()
    poll_s: float = DEFAULT_POLL_S
    force: bool = False

    def __post_init__(self) -> None:
        if not (math.isfinite(self.poll_s) and self.poll_s >= 0):
            raise ValueError("--model-poll must be 0 (off) or a positive number of seconds")
        tasks = [task for task, _ in self.pins]
        if len(set(tasks)) != len(tasks):
            raise ValueError("--model-version names a task twice")

    def pin(self, task: str) -> int | None:
        """The version pinned for ``task`` (``None``: the newest the guard allows)."""
        return dict(self.pins).get(task)


def _pins(value: str) -> list[tuple[str, int]]:
    pins = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        task, equals, number = item.partition("=")
        if not equals or task.strip() not in TASK_NAMES or not number.strip().isdigit() or int(number) < 1:
            raise argparse.ArgumentTypeError(f"expected TASK=VERSION with a task of {', '.join(TASK_NAMES)} "
                                             f"and a version from 1, got {item!r}")
        pins.append((task.strip(), int(number)))
    if not pins:
        raise argparse.ArgumentTypeError("expected TASK=VERSION")
    return pins


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The model-version options (see :class:`ModelsConfig`)."""
    group = parser.add_argument_group("model versions (docs/model-repository.md)")
    group.add_argument("--model-version", type=_pins, action="append", default=[], metavar="TASK=N",
                        help="serve version N of TASK and do not promote newer ones found in the "
                             "repository (repeatable, or comma-separated; default: the newest the "
                             "deployment guard allows)")
    group.add_argument("--model-poll", type=float, default=DEFAULT_POLL_S, metavar="S",
                        help="seconds between looks for new model versions in --artifacts (0: off; "
                             f"default {DEFAULT_POLL_S:g})")
    group.add_argument("--force", action="store_true",
                        help="serve the newest model versions even where the deployment guard holds them "
                             "back (not better than their baselines, or worse than the serving version)")


def from_args(args: argparse.Namespace) -> ModelsConfig:
    """Raises ``ValueError`` (one line) for inconsistent values."""
    pins = tuple(pin for group in args.model_version for pin in group)
    return ModelsConfig(pins=pins, poll_s=args.model_poll, force=args.force)
