"""One compiled optimisation step, and the optimizer it expects."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import Tensor, nn

from models.graph.buckets import pad_rows
from models.nn.inputs import ModelInputs, PurchaseExtras
from models.nn.model import TaskModel
from models.runtime.compile import CompileConfig, Ladders, Runner, compile_function


def tensor_lr_adam(parameters: Iterable[Tensor], lr: float, weight_decay: float = 0.0) -> torch.optim.Adam:
    """Adam for :class:`TrainStep`: the learning rate is a tensor, so a schedule writes it in place
    (``group["lr"].fill_(x)``) and nothing recompiles; ``fused`` runs one kernel for all
    parameters (4x faster than the default per-parameter loop on CPU, which also calls
    ``.item()`` on a tensor learning rate for every parameter)."""
    parameters = list(parameters)
    lr_tensor = torch.tensor(lr, device=parameters[0].device if parameters else None)
    return torch.optim.Adam(parameters, lr=lr_tensor, weight_decay=weight_decay, fused=True)


def _step_loss(model: TaskModel, inputs: ModelInputs, target: Tensor | ModelInputs, weight: Tensor,
               log_q: Tensor | None = None, extras: PurchaseExtras | None = None) -> Tensor:
    out = model(inputs)
    if isinstance(target, ModelInputs):  # purchase: the positive articles' keys are the target
        target = model(target)
    return model.loss(out, target, weight, log_q, extras)


class StepLoss(nn.Module):
    """The step's forward passes and loss as one module, so a wrapper such as
    DistributedDataParallel sees every parameter the loss uses inside its ``forward``."""

    def __init__(self, model: TaskModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, inputs: ModelInputs, target: Tensor | ModelInputs, weight: Tensor,
                log_q: Tensor | None = None, extras: PurchaseExtras | None = None) -> Tensor:
        return _step_loss(self.model, inputs, target, weight, log_q, extras)


class TrainStep(Runner):
    """One optimisation step: compiled forward + loss, backward, optimizer step.

    Build the optimizer with :func:`tensor_lr_adam` (learning rate as a tensor, fused); the
    returned loss stays on the device (accumulate, sync once per epoch).

    Args:
        model: the model being trained (put in train mode here).
        optimizer: its optimizer.
        config: compile strategy.
        ladders: per seed type of the head, its buckets (required for ``"buckets"``).
        wrap: wraps the :class:`StepLoss` module that runs (e.g.
            :func:`training.fit.distributed.wrap`: DistributedDataParallel); default: none.
    """

    def __init__(self, model: TaskModel, optimizer: torch.optim.Optimizer, config: CompileConfig,
                 ladders: Ladders = None, wrap: Callable[[nn.Module], nn.Module] | None = None) -> None:
        super().__init__(model, config, ladders)
        self.model = model.train()
        self.optimizer = optimizer
        self.device = next(model.parameters()).device

        if wrap is not None:  # compiled inside the wrapper: Dynamo cannot trace DDP's own forward
            self.loss_fn = wrap(compile_function(StepLoss(model), config, self.device, self.num_graphs))
            return

        def loss_fn(inputs: ModelInputs, target: Tensor | ModelInputs, weight: Tensor,
                    log_q: Tensor | None, extras: PurchaseExtras | None) -> Tensor:
            return _step_loss(model, inputs, target, weight, log_q, extras)

        self.loss_fn = compile_function(loss_fn, config, self.device, self.num_graphs)

    def __call__(self, inputs: ModelInputs, target: Tensor | ModelInputs,
                 log_q: Tensor | None = None, extras: PurchaseExtras | None = None) -> Tensor:
        """Args:
            inputs: the batch.
            target: ``(B,)`` labels, or for purchase the inputs of each seed's positive article.
            log_q: purchase only, optional: ``(B,)`` log frequency of each positive among the
                positives (the sampling correction of :meth:`models.nn.heads.PurchaseHead.loss`).
            extras: purchase only, optional: positives' articles and popularity, the rows' histories.

        Returns:
            The detached 0-dim loss on the model's device.
        """
        if not self.model.training:
            self.model.train()
        padded, rows = self._prepare(inputs.to(self.device))
        weight = torch.ones(inputs.num_seeds, device=self.device)
        if isinstance(target, ModelInputs):
            target = self._prepare(target.to(self.device))[0]
            if log_q is not None:
                log_q = pad_rows(log_q.to(self.device), target.seed_rows)
            if extras is not None:
                extras = extras.to(self.device).padded(rows, target.seed_rows)
        else:
            target = target.to(self.device)
        if rows != inputs.num_seeds:
            weight = pad_rows(weight, rows)
            target = target if isinstance(target, ModelInputs) else pad_rows(target, rows)
        loss = self.loss_fn(padded, target, weight, log_q, extras)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()
