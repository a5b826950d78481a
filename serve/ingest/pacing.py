"""How often the graph owner works: as rarely as its lag target allows, and never more than a share
of its time.

The graph owner (:mod:`serve.graph`) runs beside the inference workers on the same cores, so every
CPU-second it spends is taken from answers. Under a steady stream of batches an owner that worked
whenever something was new would recompute the purchase article keys of the whole catalogue again and
again (its costliest work by far), and applying a batch rebuilds the whole delta, whose cost grows
with it. A :class:`Pacer` spaces the work instead (one for applying, ``--ingest-share``, one for the
key refreshes, ``--key-share``): after work that took ``c`` seconds, the next waits
``c * (1 - share) / share``, so it runs at most ``share`` of the time whatever the machine, its
load, the catalogue or the delta size. ``c`` is the median of the last few working steps: one slow
step (a first refresh touching cold memory, a collection) does not stall the owner for 1/share
times its cost, while a lasting change (a growing delta) is followed within a few steps.

A share alone spends the whole share whatever the lag needs: on two cores saturated by answers the
owner stepped ~2.4 times a second, its batches served within ~0.6 s at p99, and took ~0.2 of the
cores from the answers. With a lag target ``T`` (``--ingest-lag-target``) the owner's steps pause
longer, ``T - 2 c``: a batch that arrives as a step starts waits for that step, the pause and the
next step, ``c + (T - 2c) + c = T``. The owner then spends what the target needs and no more (on
the same benchmark, T = 0.8 s: ~1.3 steps a second, lag p99 0.81-0.96 s, half the owner's CPU);
the share still bounds it where a step costs more than the target leaves room for.

Batches that arrive meanwhile stay in the log and are applied together at the next step (one
rebuild; the keys cover all of them at the next refresh), so the work per batch falls as the stream
gets denser. A step after an idle spell is not delayed (the pause has passed): a lone batch is
applied, keyed and published within a poll, which ``?sync=true`` on a quiet server relies on.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field

from serve.ingest.config import DEFAULT_POLL_S

RECENT_STEPS = 5  # working steps whose median cost sets the pause


@dataclass
class Pacer:
    """Spaces the owner's steps (see the module docstring).

    Args:
        share: the largest share of the time the steps may take, in ``(0, 1]`` (``1``: no pause
            after work, step again as soon as something is new).
        poll_s: pause after a step that found nothing new.
        lag_target_s: seconds within which a batch should be served; the pause after work is at
            least ``lag_target_s - 2 c`` (``0``: the share alone sets it).
    """

    share: float
    poll_s: float = DEFAULT_POLL_S
    lag_target_s: float = 0.0
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT_STEPS), init=False)

    def __post_init__(self) -> None:
        if not 0 < self.share <= 1:
            raise ValueError(f"the share must be in (0, 1], got {self.share}")
        if self.lag_target_s < 0:
            raise ValueError(f"the lag target must not be negative, got {self.lag_target_s}")

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
        typical = statistics.median(self.recent)
        return max(typical * (1.0 - self.share) / self.share, self.lag_target_s - 2.0 * typical)
