"""The plain MLP script with a few lines of the run API (marked `# sweeper`): seed streams, curves, live view.

    python -m sweeper --config-dir conf +experiment=logged_width seeds=0-3     # from this folder

What the 6 lines buy over zero glue (examples/plain_script): the data order comes from the run's "data_order"
seed stream, so every variant of a seed sees the same batches and the report uses the paired test (tighter
intervals from the same seeds); run.log gives metrics curves (report plots, the live view's step counter and
ETA, TensorBoard with sweeper.tensorboard=true); run.finish names the final metrics. No checkpoints: a stopped
run restarts from scratch (examples/mlp_widths adds them: bitwise resume, preemption, health checks).
"""
import torch
import torch.nn.functional as F
from torch import nn

import sweeper  # sweeper


def data(n: int, dim: int = 16, classes: int = 8, seed: int = 1):
    """n points (n, dim) labelled by a fixed random teacher network (the same for every run)."""
    g = torch.Generator().manual_seed(1234)
    w1 = torch.randn(dim, 64, generator=g) / dim ** 0.5                  # (dim, 64)
    w2 = torch.randn(64, classes, generator=g)                           # (64, classes)
    x = torch.randn(n, dim, generator=torch.Generator().manual_seed(seed))   # (n, dim)
    return x, (torch.sin(1.7 * (x @ w1)) @ w2).argmax(dim=1)              # (n, dim), (n,)


def main() -> None:
    run = sweeper.init()                                                    # sweeper
    cfg = run.config                                                        # sweeper
    torch.manual_seed(run.seed_for("init"))                                 # sweeper
    order = run.generator("data_order")                                     # sweeper
    x_train, y_train = data(20000, seed=1)
    x_val, y_val = data(2000, seed=2)
    act = {"relu": nn.ReLU(), "tanh": nn.Tanh(), "none": nn.Identity()}[cfg.act]
    model = nn.Sequential(nn.Linear(16, cfg.width), act, nn.Linear(cfg.width, cfg.width), act,
                          nn.Linear(cfg.width, 8))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    for step in range(cfg.steps):
        idx = torch.randint(0, len(x_train), (64,), generator=order)      # (64,)
        loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (step + 1) % 50 == 0:
            run.log(step + 1, train_loss=loss.item())                       # sweeper
    with torch.no_grad():
        logits = model(x_val)
        run.finish(val_loss=F.cross_entropy(logits, y_val).item(),        # sweeper
                   val_acc=(logits.argmax(1) == y_val).float().mean().item(),
                   examples_seen=64 * cfg.steps, optimizer_steps=cfg.steps,  # what it consumed, its data's sizes
                   train_size=len(x_train), eval_size=len(x_val))


if __name__ == "__main__":
    main()
