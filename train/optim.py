"""What the loop and the health preflight build alike: the device, the AdamW optimizer, the LR schedule.

    device = pick_device(cfg)                          # train.device: auto (cuda when available) | cpu | cuda
    optimizer = make_optimizer(model.parameters(), cfg)
    scheduler = make_scheduler(optimizer, cfg)         # lr_at(step, cfg): linear warmup, cosine to 10%
"""
from __future__ import annotations

import math

import torch

from sweeper.train.config import RunConfig


def pick_device(cfg: RunConfig) -> torch.device:
    if cfg.train.device == "cuda" or (cfg.train.device == "auto" and torch.cuda.is_available()):
        return torch.device("cuda")
    return torch.device("cpu")


def device_name(device: torch.device) -> str:
    """"cpu", or the CUDA device's model name (part of the checkpoint fingerprint)."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def lr_at(step: int, cfg: RunConfig) -> float:
    """Linear warmup, then cosine decay to 10% of train.lr."""
    t = cfg.train
    if step < t.warmup_steps:
        return t.lr * (step + 1) / t.warmup_steps
    progress = (step - t.warmup_steps) / max(1, t.steps - t.warmup_steps)
    return t.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0))))


def make_optimizer(params, cfg: RunConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (not on norms and biases)."""
    params = list(params)
    return torch.optim.AdamW(
        [{"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.train.weight_decay},
         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
        lr=cfg.train.lr, betas=(0.9, 0.95), foreach=False)


def make_scheduler(optimizer: torch.optim.Optimizer, cfg: RunConfig) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_at(s, cfg) / cfg.train.lr)
