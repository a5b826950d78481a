"""Locust users of the relserve API: the registry's traffic mix of Zipf-popular ids, a few bad requests.

Run headless through ``python -m loadtest.run`` (which starts the server and writes the report),
or with Locust itself, e.g. for its web UI::

    locust -f loadtest/locustfile.py --host http://127.0.0.1:8000 --relserve-ids ARTIFACTS

``--list-share`` of the good requests ask for ``--list-size`` ids at once (``{"customer_ids":
[...]}``; Locust names them ``<path> [list]``).

A deliberately bad request (unknown id, malformed body, ``k`` out of range, not JSON) succeeds
when the server answers it with the expected 4xx and fails otherwise, as does a good request
that is not answered 200 with a well-formed body. Each request's ``context`` carries its task,
kind and expected status, so a report can tell expected 4xx from failures.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from locust import FastHttpUser, events
from locust.argument_parser import LocustArgumentParser

from loadtest.id_pool import IdPool
from loadtest.traffic import (
    DEFAULT_BAD_SHARE,
    DEFAULT_LIST_SHARE,
    DEFAULT_LIST_SIZE,
    PlannedRequest,
    Traffic,
    answer_problem,
)
from models.registry import TASKS


@events.init_command_line_parser.add_listener
def add_arguments(parser: LocustArgumentParser) -> None:
    group = parser.add_argument_group("relserve")
    group.add_argument("--relserve-ids", default="", metavar="PATH",
                       help="id file written by python -m loadtest.run, or an artifacts directory")
    group.add_argument("--think-ms", type=float, default=0.0,
                       help="mean think time between a user's requests, exponential (0: closed loop)")
    group.add_argument("--bad-share", type=float, default=DEFAULT_BAD_SHARE,
                       help="share of deliberately bad requests")
    group.add_argument("--list-share", type=float, default=DEFAULT_LIST_SHARE,
                       help="share of good requests that ask for a list of ids")
    group.add_argument("--list-size", type=int, default=DEFAULT_LIST_SIZE, help="ids per list request")


@functools.cache
def load_traffic(source: str, bad_share: float, list_share: float = DEFAULT_LIST_SHARE,
                 list_size: int = DEFAULT_LIST_SIZE) -> Traffic:
    """The traffic of an id file or an artifacts directory, built once per process."""
    if not source:
        raise ValueError("no ids: pass --relserve-ids (an id file or an artifacts directory)")
    path = Path(source)
    pool = IdPool.from_snapshot(path / "snapshot") if path.is_dir() else IdPool.load(path)
    return Traffic(pool, bad_share, list_share=list_share, list_size=list_size)


def _sender(task: str) -> Callable[[RelserveUser], None]:
    def send(user: RelserveUser) -> None:
        user.send(user.traffic.plan(task, user.rng))

    send.__name__ = task
    return send


class RelserveUser(FastHttpUser):
    """One client: each task gets its registry ``load_share`` of the requests (``bad_share`` of them bad).

    Every task is in each user, so even a handful of users sends the full mix. Options come
    from Locust's parsed options (``--relserve-ids``, ``--think-ms``, ``--bad-share``).
    """

    def on_start(self) -> None:
        options = self.environment.parsed_options
        self.traffic = load_traffic(options.relserve_ids, options.bad_share, options.list_share,
                                    options.list_size)
        self.think_s = options.think_ms / 1000.0
        self.rng = random.Random()

    tasks: ClassVar[dict] = {_sender(name): spec.load_share for name, spec in TASKS.items()}

    def wait_time(self) -> float:
        return self.rng.expovariate(1.0 / self.think_s) if self.think_s > 0 else 0.0

    def send(self, planned: PlannedRequest) -> None:
        context = {"task": planned.task, "kind": planned.kind, "expected": planned.expected}
        with self.client.post(planned.path, data=planned.body, headers={"Content-Type": planned.content_type},
                              name=planned.label, context=context, catch_response=True) as response:
            problem = answer_problem(planned, response.status_code, response.content)
            if problem is None:
                response.success()
            else:
                response.failure(problem)
