"""The moving average of the weights that training validates and keeps: its half-life in epochs,
its ramp over the first steps, and a swap in place that gives the trained weights back."""

from __future__ import annotations

import pytest
import torch

from training.fit.averaging import WeightAverage


def test_a_step_counts_half_after_the_half_life() -> None:
    weight = torch.zeros(3)
    average = WeightAverage([weight], steps_per_epoch=10, half_life_epochs=1.0)
    average.steps = 10**6  # past the ramp
    weight.fill_(1.0)
    for _ in range(10):  # one epoch of steps at the new value
        average.update()
    assert torch.allclose(average.average[0], torch.full((3,), 0.5), atol=1e-6)


def test_the_ramp_forgets_the_initial_weights() -> None:
    weight = torch.zeros(2)
    average = WeightAverage([weight], steps_per_epoch=100, half_life_epochs=1.0)
    weight.fill_(1.0)
    average.update()  # first step: decay 2/11, the initial weights keep less than a fifth
    assert average.average[0][0].item() == pytest.approx(9 / 11)


def test_swapped_holds_the_average_in_place_and_gives_the_weights_back() -> None:
    model = torch.nn.Linear(2, 1)
    average = WeightAverage(model.parameters(), steps_per_epoch=4, half_life_epochs=0.5)
    trained = [p.detach().clone() for p in model.parameters()]
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    average.update()
    expected = [a.clone() for a in average.average]
    pointers = [p.data_ptr() for p in model.parameters()]
    with average.swapped():
        assert [p.data_ptr() for p in model.parameters()] == pointers  # the optimizer keeps its tensors
        for p, a in zip(model.parameters(), expected, strict=True):
            assert torch.equal(p, a)  # the average, not the trained weights...
    for p, t, a in zip(model.parameters(), trained, expected, strict=True):
        assert torch.allclose(p, t + 1.0)  # ...and the trained weights after the block
        assert not torch.allclose(p, a)
    with pytest.raises(ValueError, match="half-life"):
        WeightAverage(model.parameters(), 4, 0.0)
