"""Random-features regression on the run API: init/log/finish; the seed picks the random features."""
import os  # noqa: F401

import numpy as np

import sweeper

run = sweeper.init()
cfg = run.config
seed = run.seed
rng = np.random.default_rng(seed)
g = np.random.default_rng(3)
X = g.uniform(-2, 2, size=(300, 4))
y = np.sin(X).sum(1) + g.normal(scale=0.2, size=300)
W = rng.normal(size=(4, cfg.features))
b = rng.uniform(0, 2 * np.pi, size=cfg.features)
F = np.cos(X @ W + b)
Ftr, ytr, Fva, yva = F[:200], y[:200], F[200:], y[200:]
w = np.zeros(cfg.features)
for step in range(1, 41):
    w -= 0.05 * (Ftr.T @ (Ftr @ w - ytr) / 200)
    if step % 5 == 0:
        run.log(step, train_loss=float(np.mean((Ftr @ w - ytr) ** 2)), val_loss=float(np.mean((Fva @ w - yva) ** 2)))
run.finish(val_loss=float(np.mean((Fva @ w - yva) ** 2)))
