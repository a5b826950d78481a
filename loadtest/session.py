"""Run Locust in this process (its library API), headless and for a fixed time, recording every request.

Importing this module imports Locust, which monkey-patches the standard library with gevent:
import it before anything that opens sockets or imports ``ssl``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import gevent
from locust import events
from locust.argument_parser import get_parser
from locust.env import Environment
from tqdm import tqdm

from loadtest.locustfile import RelserveUser
from loadtest.record import RequestLog
from loadtest.traffic import DEFAULT_BAD_SHARE


@dataclass(frozen=True)
class LoadShape:
    """How hard and how long to push.

    Args:
        users: concurrent simulated users.
        spawn_rate: users started per second until ``users`` run.
        duration_s: seconds from the first user's start until all stop.
        think_ms: mean think time between a user's requests (0: closed loop).
        bad_share: share of deliberately bad requests.
    """

    users: int
    spawn_rate: float
    duration_s: float
    think_ms: float = 0.0
    bad_share: float = DEFAULT_BAD_SHARE


@dataclass
class LoadOutcome:
    """The request log and the Python exceptions raised inside users (each ``"message (N x)"``)."""

    log: RequestLog
    user_exceptions: list[str]


def run_locust(url: str, ids_file: Path, shape: LoadShape, progress: bool = True) -> LoadOutcome:
    """Drive ``url`` with :class:`RelserveUser` for ``shape.duration_s`` seconds, then stop every user.

    Args:
        url: ``http://host:port`` of a ready server.
        ids_file: an :class:`loadtest.id_pool.IdPool` file.
        shape: users, spawn rate, duration, think time, share of bad requests.
        progress: show a tqdm bar on stderr.
    """
    options = get_parser(default_config_files=[]).parse_args([
        "--headless", "--relserve-ids", str(ids_file), "--think-ms", str(shape.think_ms),
        "--bad-share", str(shape.bad_share)])
    env = Environment(user_classes=[RelserveUser], events=events, host=url, parsed_options=options)
    log = RequestLog()
    events.request.add_listener(log.on_request)
    runner = env.create_local_runner()
    try:
        log.started_s = time.time()
        runner.start(shape.users, spawn_rate=shape.spawn_rate)
        with tqdm(total=round(shape.duration_s), desc="load", disable=not progress,
                  bar_format="{desc}: {bar} {n_fmt}/{total_fmt} s{postfix}") as bar:
            while (elapsed := time.time() - log.started_s) < shape.duration_s:
                gevent.sleep(min(1.0, shape.duration_s - elapsed))
                log.users.append((time.time(), runner.user_count))
                bar.update(min(round(time.time() - log.started_s), bar.total) - bar.n)
                bar.set_postfix(users=runner.user_count, requests=len(log.end_s), failures=log.errors.total())
    finally:
        log.stop()
        runner.quit()
        events.request.remove_listener(log.on_request)
    exceptions = [f"{row['msg']} ({row['count']} x)" for row in runner.exceptions.values()]
    return LoadOutcome(log, exceptions)
