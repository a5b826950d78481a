"""How often a worker's follower works: a bound on the share of the worker's time it takes.

Each follower step that does something (read new batches, apply them with one rebuild of the delta)
and each refresh of the purchase article keys takes time from the worker's answers: the follower
thread and the thread answering requests share the worker's GIL, so while a step runs the worker
answers about half as fast (measured on the demo, 2 cores). Under a steady stream of batches a
follower that worked whenever something was new would be busy most of the time: the purchase
worker would recompute the keys of the whole catalogue again and again, and applying a batch
rebuilds the whole delta, whose cost grows with it. A :class:`Pacer` spaces the work instead (one
for the steps, ``--ingest-share``, one for the key refreshes, ``--key-share``): after work that took
``c`` seconds, the next waits ``c * (1 - share) / share``, so it runs at most ``share`` of the time
whatever the machine, its load, the catalogue or the delta size. ``c`` is the median of the last
few working steps: one slow step (a first refresh touching cold memory, a collection) does not
stall the follower for 1/share times its cost, while a lasting change (a growing delta) is
followed within a few steps.

Batches that arrive meanwhile stay in the log and are applied together at the next step (one
rebuild; the keys cover all of them at the next refresh), so the work per batch falls as the stream
gets denser, and the lag a batch sees is at most about one pause plus two steps (the one under way,
then its own).

A step after an idle spell is not delayed (the pause has passed): a lone batch is applied, keyed
and reported within a poll, which ``?sync=true`` on a quiet server relies on.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from dataclasses import dataclass, field

from serve.ingest.config import DEFAULT_POLL_S

RECENT_STEPS = 5  # working steps whose median cost sets the pause


@dataclass
class Pacer:
    """Spaces a follower's steps (see the module docstring).

    Args:
        share: the largest share of the time the steps may take, in ``(0, 1]`` (``1``: no pause
            after work, step again as soon as something is new).
        poll_s: pause after a step that found nothing new.
    """

    share: float
    poll_s: float = DEFAULT_POLL_S
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT_STEPS), init=False)

    def __post_init__(self) -> None:
        if not 0 < self.share <= 1:
            raise ValueError(f"the follower's share must be in (0, 1], got {self.share}")

    def pause(self, cost_s: float, worked: bool) -> float:
        """Seconds to wait before the next step.

        Args:
            cost_s: seconds the step just finished took (what counts against the share).
            worked: whether it applied batches or refreshed (a step that found nothing new waits
                ``poll_s``, or longer if even looking was expensive).
        """
        cost_s = max(0.0, cost_s)
        if not worked:
            return max(self.poll_s, cost_s * (1.0 - self.share) / self.share)
        self.recent.append(cost_s)
        return statistics.median(self.recent) * (1.0 - self.share) / self.share


class StepClock:
    """Wall seconds between :meth:`start` and :meth:`stop`, less any time excluded meanwhile (a
    switch to a compacted snapshot version, a rare event the share is not about: a pause after it
    would hold back the batches behind it for many seconds).

    Wall time, not the thread's CPU time: the worker's answers are slowed for as long as the step
    holds or contends for the GIL, which on a loaded machine is much longer than its CPU time (a
    demo key refresh: ~60 ms of CPU, 120-500 ms of wall time beside a busy serving thread); it also
    counts torch's intra-op threads.
    """

    def __init__(self) -> None:
        self._started = 0.0
        self._excluded = 0.0

    def start(self) -> None:
        self._started = time.perf_counter()
        self._excluded = 0.0

    def exclude(self, seconds: float) -> None:
        self._excluded += seconds

    def stop(self) -> float:
        return max(0.0, time.perf_counter() - self._started - self._excluded)
