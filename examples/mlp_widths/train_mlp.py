"""A small MLP on generated data: a plain PyTorch script, made sweepable by the lines marked `# sweeper`.

    python -m sweeper --config-dir conf +experiment=mlp_width seeds=0-3   # from this folder: 3 variants x 4 seeds

The data: points in `dataset.dim` dimensions labelled by a fixed random "teacher" network (the same for every run);
the student MLP's width and activation are what the experiment varies. Every `# sweeper` line is glue: the seed
streams, the checkpoint that makes a run resumable bitwise, the stop request (Ctrl-C, Slurm preemption), the
health monitor, the metrics and the final result the decision table is made of.
"""
import sys

import torch
import torch.nn.functional as F
from torch import nn

import sweeper  # sweeper


def teacher_data(cfg, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n points (n, dim) and their labels (n,) from a fixed random two-layer teacher network."""
    g = torch.Generator().manual_seed(cfg.teacher_seed)
    w1 = torch.randn(cfg.dim, cfg.teacher_hidden, generator=g) / cfg.dim ** 0.5    # (dim, H)
    w2 = torch.randn(cfg.teacher_hidden, cfg.classes, generator=g)                 # (H, classes)
    x = torch.randn(n, cfg.dim, generator=torch.Generator().manual_seed(seed))      # (n, dim)
    logits = torch.sin(cfg.teacher_scale * (x @ w1)) @ w2                          # (n, classes)
    return x, logits.argmax(dim=1)


def make_model(cfg, dim: int, classes: int) -> nn.Module:
    act = {"relu": nn.ReLU(), "tanh": nn.Tanh(), "none": nn.Identity()}[cfg.activation]
    return nn.Sequential(nn.Linear(dim, cfg.width), act, nn.Linear(cfg.width, cfg.width), act,
                         nn.Linear(cfg.width, classes))


def main() -> None:
    run = sweeper.init()                                                    # sweeper
    cfg = run.config                                                        # sweeper
    x_train, y_train = teacher_data(cfg.dataset, cfg.dataset.n_train, seed=1)
    x_val, y_val = teacher_data(cfg.dataset, cfg.dataset.n_val, seed=2)
    torch.manual_seed(run.seed_for("init"))                                 # sweeper
    model = make_model(cfg.model, cfg.dataset.dim, cfg.dataset.classes)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay)
    order = run.generator("data_order")                                     # sweeper
    state = run.load_checkpoint()                                           # sweeper
    if state:                                                               # sweeper
        model.load_state_dict(state["model"]), opt.load_state_dict(state["opt"]), order.set_state(state["order"])
    health = run.health(model, num_classes=cfg.dataset.classes, val_data=(x_val, y_val),   # sweeper
                        evaluate=lambda m: evaluate(m, x_val, y_val, 0, cfg, always=True))

    def snapshot() -> dict:
        return {"model": model.state_dict(), "opt": opt.state_dict(), "order": order.get_state()}

    for step in range(run.start_step, cfg.steps):                           # sweeper
        if run.should_stop:                                                 # sweeper
            run.save_checkpoint(snapshot(), step)                           # sweeper
            sys.exit(run.interrupt(step))                                   # sweeper
        if step % cfg.ckpt_interval == 0 and step > run.start_step:
            run.save_checkpoint(snapshot(), step)                           # sweeper
        idx = torch.randint(0, len(x_train), (cfg.optim.batch_size,), generator=order)   # (B,)
        loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
        opt.zero_grad()
        loss.backward()
        health.after_backward(step, loss)                                   # sweeper
        if health.diverged:
            run.diverged(step, health.diverged["reason"])                   # sweeper
            return
        opt.step()
        health.after_step(step)                                             # sweeper
        if (step + 1) % cfg.log_interval == 0:
            run.log(step + 1, train_loss=loss.item(), **evaluate(model, x_val, y_val, step + 1, cfg))   # sweeper
    run.finish(**evaluate(model, x_val, y_val, cfg.steps, cfg, always=True),  # sweeper
               examples_seen=cfg.steps * cfg.optim.batch_size, optimizer_steps=cfg.steps,   # what it consumed
               train_size=len(x_train), eval_size=len(x_val))               # and its data's sizes


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, step: int, cfg, always: bool = False) -> dict:
    if not always and step % cfg.eval_interval:
        return {}
    logits = model(x)
    return {"val_loss": F.cross_entropy(logits, y).item(), "val_acc": (logits.argmax(1) == y).float().mean().item()}


if __name__ == "__main__":
    main()
