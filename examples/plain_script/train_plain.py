"""A plain argparse PyTorch script that knows nothing of sweeper (0 lines of glue): a small MLP on generated data.

    python train_plain.py --seed 0 --width 32 --act relu --steps 1000 --lr 0.003 --out run     # by hand
    python -m sweeper --config-dir conf +experiment=plain_width seeds=0-3                     # swept as it is

It prints its progress and writes OUT/metrics.json with its final validation loss and accuracy; sweeper passes
the run's config as --key=value (task.args: flags), gives each run its own --out folder ({out_dir}) and reads the
final metrics from that file.
"""
import argparse
import json
import os

import torch
import torch.nn.functional as F
from torch import nn


def data(n: int, dim: int = 16, classes: int = 8, seed: int = 1):
    """n points (n, dim) labelled by a fixed random teacher network (the same for every run)."""
    g = torch.Generator().manual_seed(1234)
    w1 = torch.randn(dim, 64, generator=g) / dim ** 0.5                  # (dim, 64)
    w2 = torch.randn(64, classes, generator=g)                           # (64, classes)
    x = torch.randn(n, dim, generator=torch.Generator().manual_seed(seed))   # (n, dim)
    return x, (torch.sin(1.7 * (x @ w1)) @ w2).argmax(dim=1)              # (n, dim), (n,)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--act", choices=["relu", "tanh", "none"], default="relu")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--out", default="run")
    args = p.parse_args()

    torch.manual_seed(args.seed)
    x_train, y_train = data(20000, seed=1)
    x_val, y_val = data(2000, seed=2)
    act = {"relu": nn.ReLU(), "tanh": nn.Tanh(), "none": nn.Identity()}[args.act]
    model = nn.Sequential(nn.Linear(16, args.width), act, nn.Linear(args.width, args.width), act,
                          nn.Linear(args.width, 8))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    for step in range(args.steps):
        idx = torch.randint(0, len(x_train), (64,))                      # (64,)
        loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (step + 1) % 100 == 0:
            print(f"step {step + 1} loss {loss.item():.4f}", flush=True)
    with torch.no_grad():
        logits = model(x_val)
        val_loss = F.cross_entropy(logits, y_val).item()
        val_acc = (logits.argmax(1) == y_val).float().mean().item()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump({"val_loss": val_loss, "val_acc": val_acc,          # + what it consumed and its data's sizes
                   "examples_seen": 64 * args.steps, "optimizer_steps": args.steps,   # (recorded, not metrics:
                   "train_size": len(x_train), "eval_size": len(x_val)}, f)          # docs/run-output.md)
    print(f"done: val_loss {val_loss:.4f} val_acc {val_acc:.3f}")


if __name__ == "__main__":
    main()
