"""Data-parallel training under ``torchrun``: the process group, this process's place in it, and the
few collectives ``training.fit`` needs.

``torchrun --nproc-per-node N -m training.fit ...`` starts N processes with ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK`` and a rendezvous in the environment; :func:`init_from_env` joins
them into one group (``nccl`` on CUDA, ``gloo`` on CPU). Without those variables nothing is
initialised and every helper answers as the only process (rank 0 of 1), so a plain
``python -m training.fit`` runs exactly as it does without this module.

The split of work: every rank samples its share of each step's rows
(:meth:`training.fit.batches.TrainBatches`), DistributedDataParallel averages the gradients, and
rank 0 alone evaluates, runs the baselines, logs and writes the bundles. Decisions that end
training (the validation score behind early stopping, a stop flag) are made on rank 0 and
broadcast with :func:`from_main`, so every rank runs the same number of steps and none waits on
a collective the others never reach.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import TypeVar

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

T = TypeVar("T")

# Ranks other than 0 wait in a collective while rank 0 builds the snapshot, runs the baselines
# and scores the validation week, which at full H&M size takes many minutes; the default
# timeouts (10-30 min) would kill a healthy run.
TIMEOUT = timedelta(hours=3)


def launched() -> bool:
    """Whether this process was started by ``torchrun`` (or another launcher setting its variables)."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def init_from_env() -> bool:
    """Join the process group described by the environment, if any; returns whether one is active.

    ``nccl`` with one GPU per process (``cuda:LOCAL_RANK``) when CUDA is available, else ``gloo``.
    Calling it again, or without ``torchrun``'s variables, does nothing.
    """
    if dist.is_initialized():
        return True
    if not launched():
        return False
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl" if cuda else "gloo", timeout=TIMEOUT)
    return True


def shutdown() -> None:
    """Leave the process group (no-op without one)."""
    if dist.is_initialized():
        dist.destroy_process_group()


def rank() -> int:
    """This process's rank (0 without a process group)."""
    return dist.get_rank() if dist.is_initialized() else 0


def world_size() -> int:
    """Number of processes training together (1 without a process group)."""
    return dist.get_world_size() if dist.is_initialized() else 1


def is_main() -> bool:
    """Whether this process evaluates, logs and writes (rank 0)."""
    return rank() == 0


def shard() -> tuple[int, int]:
    """``(rank, world_size)``: which part of each batch this process trains on."""
    return rank(), world_size()


def device() -> torch.device:
    """Where this process trains: its own GPU under ``nccl``, else the CPU (also without a group)."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def wrap(module: nn.Module) -> nn.Module:
    """``module`` in DistributedDataParallel when a group is active (gradients averaged over the
    ranks in ``backward``), else ``module`` itself.

    ``static_graph``: the last GNN layer's convolutions into the node type the head does not read
    (articles for churn, customers for sales) never get a gradient, and DDP would wait for them
    forever; a static graph records in the first step which parameters got one and skips the rest
    from then on (``find_unused_parameters`` would walk the autograd graph every step instead, and
    cannot see through a compiled backward, which takes every parameter).
    """
    if not dist.is_initialized():
        return module
    ids = [device()] if device().type == "cuda" else None
    return DistributedDataParallel(module, device_ids=ids, static_graph=True)


def from_main(fn: Callable[[], T]) -> T:
    """``fn()`` computed on rank 0 only and its (picklable) result handed to every rank.

    For example ``from_main(lambda: stop)`` makes rank 0's stop flag everyone's.
    """
    if not dist.is_initialized():
        return fn()
    box = [fn() if is_main() else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def mean(value: Tensor) -> Tensor:
    """``value`` averaged over the ranks (a copy; ``value`` itself without a group)."""
    if not dist.is_initialized():
        return value
    total = value.detach().clone()
    dist.all_reduce(total)
    return total / world_size()


@contextmanager
def main_first() -> Iterator[None]:
    """Runs the block (e.g. open or build the snapshot on disk) on rank 0 first, then on the first
    process of every other machine, then on the rest: on a shared filesystem the later ones find
    rank 0's result, without one each machine builds its own once, and never two processes at once."""
    if not dist.is_initialized():
        yield
        return
    turn = 0 if is_main() else 1 if int(os.environ.get("LOCAL_RANK", 0)) == 0 else 2
    for phase in range(3):
        if phase == turn:
            yield
        dist.barrier()
