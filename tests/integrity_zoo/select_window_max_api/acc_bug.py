"""Perceptron-style training; holdout accuracy logged every 10 steps (run API), higher is better."""
import numpy as np

import sweeper

run = sweeper.init()
cfg = run.config
rng = run.numpy_rng("data_order")
data = np.random.default_rng(5)
X = data.normal(size=(800, 10))
y = np.sign(X @ data.normal(size=10) + data.normal(scale=1.5, size=800))
w, accs = np.zeros(10), []
for step in range(1, cfg.steps + 1):
    i = rng.integers(0, 600, size=cfg.batch)
    wrong = y[i] * (X[i] @ w) <= 0
    w += 0.1 * (y[i][wrong] @ X[i][wrong]) / cfg.batch
    if step % 10 == 0:
        j = rng.integers(600, 800, size=50)
        accs.append(float(np.mean(np.sign(X[j] @ w) == y[j])))
        run.log(step, acc=accs[-1])
run.finish(acc=max(accs[-5:]), steps=cfg.steps)
