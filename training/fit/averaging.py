"""An exponential moving average of the weights: what each epoch is validated, kept and bundled with.

The model that validation picks is one step's weights at an epoch's end, and with a few hundred
steps of noisy gradients the score of that step moves from epoch to epoch and seed to seed (the demo
sales validation stopped at epoch 3 on one seed and epoch 9 on another). An average of the last
half-epoch or so of weights (Polyak averaging; what timm and many LLM recipes evaluate) is a point
in the same basin with the step noise averaged out. Training itself is unchanged: the optimizer
steps the raw weights, the average follows them, and the model holds the average only while it is
evaluated (:meth:`WeightAverage.swapped`).

The decay comes from a half-life in epochs, so it adapts to the epoch's length (a 30-step epoch on
small data, 1,200 steps at H&M size), and it ramps up over the first steps
(``min(decay, (1 + t) / (10 + t))``) so the average is not anchored to the initial weights.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch
from torch import Tensor


class WeightAverage:
    """An exponential moving average of ``params`` (see the module docstring).

    Args:
        params: the parameters to average (the model's, updated in place by the optimizer).
        steps_per_epoch: optimizer steps in an epoch.
        half_life_epochs: epochs after which a step's weights count half as much (``> 0``).
    """

    def __init__(self, params: Iterable[Tensor], steps_per_epoch: int, half_life_epochs: float) -> None:
        if not half_life_epochs > 0:
            raise ValueError(f"the half-life must be positive, got {half_life_epochs}")
        self.params = list(params)
        self.average = [p.detach().clone() for p in self.params]
        self.decay = 0.5 ** (1.0 / max(1.0, half_life_epochs * steps_per_epoch))
        self.steps = 0

    @torch.no_grad()
    def update(self) -> None:
        """Fold the current weights in (after each optimizer step)."""
        self.steps += 1
        decay = min(self.decay, (1 + self.steps) / (10 + self.steps))
        torch._foreach_lerp_(self.average, [p.detach() for p in self.params], 1.0 - decay)

    @torch.no_grad()
    def _exchange(self) -> None:
        for param, average in zip(self.params, self.average, strict=True):
            held = param.detach().clone()
            param.copy_(average)
            average.copy_(held)

    @contextmanager
    def swapped(self) -> Iterator[None]:
        """The model holds the average inside the block and its trained weights again after it (in
        place: the optimizer's state and a compiled step keep their tensors)."""
        self._exchange()
        try:
            yield
        finally:
            self._exchange()
