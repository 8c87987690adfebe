"""Dead units for the live monitor's zero_grad_share check: units that no batch reaches any more.

    units = DeadUnitWatch(window=3)
    units.observe(named_params, skip_ids, first=True)    # the baseline, on the very first update
    share = units.observe(named_params, skip_ids)        # each interval: the largest share, over weight matrices, of
                                                          # the units alive at the start that got exactly zero
                                                          # gradient at `window` samples in a row (units.worst: where)

A unit is an output row of a weight matrix (a Linear's output feature, a conv's output channel): a ReLU unit that is
off for every example gets exactly zero gradient in its whole row. One batch is no evidence - a sparse unit is
idle on a small batch by chance - so a row counts as dead only when it is all-zero at `window` consecutive interval
samples, each on another batch. Lookup tables (embeddings: rows of tokens absent from a batch) and sparse
gradients are left out. One boolean reduction per matrix and one host read per interval.
"""
from __future__ import annotations

from typing import Any

import torch


class DeadUnitWatch:
    def __init__(self, window: int = 3):
        self.window = max(1, int(window))
        self.sig: list[tuple[str, int]] | None = None       # (parameter, rows) watched, in order
        self.alive0: torch.Tensor | None = None             # (R,) bool: rows with a gradient at the baseline
        self.run: torch.Tensor | None = None                # (R,) int: consecutive all-zero samples per row
        self.dead_share = 0.0                               # the largest share of dead units in one matrix
        self.worst: str | None = None                       # ... that matrix

    def observe(self, named: list[tuple[str, torch.nn.Parameter]], skip: set[int], first: bool = False
                ) -> float | None:
        mats = [(n, p) for n, p in named if p.grad is not None and p.dim() >= 2 and id(p) not in skip
                and p.grad.layout == torch.strided]
        if not mats:
            return None
        with torch.no_grad():
            zero = torch.cat([p.grad.flatten(1).eq(0).all(1).to("cpu", non_blocking=True) for _, p in mats])  # (R,)
        sig = [(n, p.shape[0]) for n, p in mats]
        if first or sig != self.sig or self.alive0 is None:
            self.sig, self.alive0 = sig, ~zero
            self.run = torch.zeros_like(zero, dtype=torch.int32)
            self.dead_share = 0.0
            if first:
                return 0.0
        self.run = torch.where(zero, self.run + 1, torch.zeros_like(self.run))
        sizes = [rows for _, rows in sig]
        dead = torch.stack([d.sum() for d in ((self.run >= self.window) & self.alive0).split(sizes)])    # (M,)
        alive = torch.stack([a.sum() for a in self.alive0.split(sizes)])                                # (M,)
        shares = [d / a if a else 0.0 for d, a in zip(dead.tolist(), alive.tolist())]
        worst = max(range(len(shares)), key=shares.__getitem__)
        self.dead_share, self.worst = shares[worst], sig[worst][0]
        return self.dead_share

    def state_dict(self) -> dict[str, Any]:
        return {"sig": self.sig, "dead_share": self.dead_share, "worst": self.worst,
                "alive0": None if self.alive0 is None else self.alive0.tolist(),
                "run": None if self.run is None else self.run.tolist()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.sig = [tuple(s) for s in state["sig"]] if state.get("sig") else None
        self.dead_share, self.worst = state.get("dead_share", 0.0), state.get("worst")
        self.alive0 = None if state.get("alive0") is None else torch.tensor(state["alive0"], dtype=torch.bool)
        self.run = None if state.get("run") is None else torch.tensor(state["run"], dtype=torch.int32)
