"""Data parallelism of the built-in trainer: each rank trains on its shard of one global batch, gradients are
averaged over the ranks, so every rank holds the same model after every step.

    par = DataParallel(run.rank, run.world_size)     # after run.distributed() (gloo on CPU, nccl on CUDA)
    idx = par.shard(global_idx)                       # (B / W,) of the global batch's (B,) window indices
    loss = par.average(model.parameters(), loss)      # grads and the loss averaged over the ranks: one all-reduce
    par.same_everywhere(model)                        # rank 0's parameters and buffers on every rank

train.batch_size is the global batch: every rank draws the same global permutation from the run's data-order
stream and takes its contiguous B / W windows of each batch, so the data a run sees does not depend on its
world size and the mean of the ranks' shard losses is the global batch's loss. Gradients go through one SUM
all-reduce of a flat buffer (grads in parameter order, then the loss) and a division by W: a fixed reduction
order for a fixed world size (gloo and NCCL reduce the same elements in the same order every time), which
keeps a run bitwise reproducible and its resume bitwise equal to the run that never stopped. With one rank
and no process group every call is the identity.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from sweeper.train.config import ConfigError


class DataParallel:
    def __init__(self, rank: int, world_size: int):
        self.rank, self.world_size = rank, world_size

    @property
    def grouped(self) -> bool:
        return dist.is_available() and dist.is_initialized()

    def check_batch(self, batch_size: int) -> None:
        if batch_size % self.world_size:
            raise ConfigError(f"train.batch_size={batch_size} is not divisible by the run's {self.world_size} "
                              f"ranks (launcher.ranks_per_run / experiment.resources): the global batch is "
                              f"split evenly across ranks; use a multiple of {self.world_size}")

    def shard(self, idx: torch.Tensor) -> torch.Tensor:
        """This rank's contiguous share of the global batch: (B,) -> (B / W,)."""
        if self.world_size == 1:
            return idx
        per = idx.shape[0] // self.world_size
        return idx[self.rank * per:(self.rank + 1) * per]

    def average(self, params, loss: torch.Tensor) -> torch.Tensor:
        """Average every parameter's gradient and the loss over the ranks in place; returns the averaged loss
        (0-d). Parameters without a gradient are left out (the same ones on every rank: one graph)."""
        if not self.grouped:
            return loss
        grads = [p.grad for p in params if p.grad is not None]
        flat = torch.cat([g.reshape(-1) for g in grads] + [loss.detach().reshape(1).to(grads[0].dtype)
                                                          if grads else loss.detach().reshape(1)])   # (n + 1,)
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        flat.div_(dist.get_world_size())
        at = 0
        for g in grads:
            g.copy_(flat[at:at + g.numel()].view_as(g))
            at += g.numel()
        return flat[at].to(loss.dtype)

    def same_everywhere(self, model: torch.nn.Module) -> None:
        """Rank 0's parameters and buffers on every rank (a no-op in numbers when they are already equal)."""
        if not self.grouped or self.world_size == 1:
            return
        with torch.no_grad():
            for tensor in model.state_dict().values():
                dist.broadcast(tensor, src=0)
