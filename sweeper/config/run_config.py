"""What a run gets as run.config: the composed config without the sweeper's own keys, plus `seed`.

    run_config({"seed": 0, "train": {...}, "sweeper": {...}}, seed=3)   # {"seed": 3, "train": {...}}
"""
from __future__ import annotations

RESERVED = ("sweeper", "launcher", "seeds", "experiment", "task", "hydra")   # never part of a run's config


def run_config(cfg: dict, seed: int = 0) -> dict:
    """A run's config: every top-level key of the composed config but the sweeper's own, and `seed`."""
    return {"seed": seed, **{k: v for k, v in cfg.items() if k not in RESERVED and k != "seed"}}
