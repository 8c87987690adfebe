"""Batches of character windows with a data order that can be saved and restored mid-epoch.

    sampler = EpochSampler(n_windows=len(train) // T, batch_size=B, generator=streams.generator("data_order"))
    idx = sampler.next_indices()                 # (B,) window indices of this step
    state = sampler.state_dict(); sampler.load_state_dict(state)   # bitwise-identical continuation

Each epoch is one permutation of the non-overlapping training windows, drawn from the data-order generator.
The saved state is the generator state from BEFORE the current epoch's permutation plus the position inside
the epoch: restoring redraws the same permutation and continues at the same batch (the DataLoader pitfall of
re-drawing from an advanced generator cannot happen here).
"""
from __future__ import annotations

import hashlib

import numpy as np
import torch


class EpochSampler:
    def __init__(self, n_windows: int, batch_size: int, generator: torch.Generator):
        if n_windows < batch_size:
            raise ValueError(f"the training split holds {n_windows} windows, fewer than train.batch_size="
                             f"{batch_size}: use a larger corpus or a smaller batch/context")
        self.n_windows, self.batch_size, self.generator = n_windows, batch_size, generator
        self.epoch = -1
        self.pos = 0
        self.perm: torch.Tensor | None = None
        self._state_before_perm: torch.Tensor | None = None

    def _new_epoch(self) -> None:
        self.epoch += 1
        self._state_before_perm = self.generator.get_state()
        self.perm = torch.randperm(self.n_windows, generator=self.generator)  # (n_windows,)
        self.pos = 0

    def next_indices(self) -> torch.Tensor:
        if self.perm is None or self.pos + self.batch_size > self.n_windows:
            self._new_epoch()
        idx = self.perm[self.pos:self.pos + self.batch_size]  # (B,)
        self.pos += self.batch_size
        return idx

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "pos": self.pos, "n_windows": self.n_windows, "batch_size": self.batch_size,
                "state_before_perm": None if self._state_before_perm is None else self._state_before_perm.clone(),
                "generator_state": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        if state["n_windows"] != self.n_windows:
            raise ValueError(f"data order state is for {state['n_windows']} windows, this corpus has "
                             f"{self.n_windows}")
        if state.get("batch_size", self.batch_size) != self.batch_size:
            raise ValueError(f"data order state is for batch size {state['batch_size']}, this run uses "
                             f"{self.batch_size}")
        if state["state_before_perm"] is None:
            self.generator.set_state(state["generator_state"])
            self.epoch, self.pos, self.perm = -1, 0, None
            return
        self.generator.set_state(state["state_before_perm"])
        self.epoch = state["epoch"] - 1
        self._new_epoch()
        self.pos = state["pos"]
        if not torch.equal(self.generator.get_state(), state["generator_state"]):
            raise ValueError("data order state is inconsistent: redrawing the epoch's permutation from the saved "
                             "generator state does not reproduce the saved state after it")


def windows(tokens: np.ndarray, starts: torch.Tensor, context: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-character targets for windows starting at `starts`: each (B, T) int64."""
    offsets = starts.numpy()[:, None] + np.arange(context + 1)[None, :]     # (B, T+1)
    chunk = torch.from_numpy(tokens[offsets].astype(np.int64))              # (B, T+1)
    return chunk[:, :-1], chunk[:, 1:]


def eval_starts(n_tokens: int, context: int, n_batches: int, batch_size: int,
                generator: torch.Generator) -> torch.Tensor:
    """Fixed validation window starts (n_batches, B), drawn once from the eval-batches stream."""
    high = n_tokens - context - 1
    if high <= 0:
        raise ValueError(f"the validation split ({n_tokens} tokens) is shorter than model.context+1")
    return torch.randint(0, high, (n_batches, batch_size), generator=generator)


def tensor_hash(t: torch.Tensor) -> str:
    return hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()[:16]
