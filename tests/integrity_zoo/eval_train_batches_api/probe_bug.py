"""A linear probe fitted full-batch; fit_err logged every step, check_err every 10 (run API)."""
import numpy as np

import sweeper

run = sweeper.init()
cfg = run.config
rng = run.numpy_rng("data_order")
X = rng.normal(size=(240, 5))
y = np.sign(X @ np.array([1.0, 0.5, -1.0, 0.0, 0.3]) + rng.normal(scale=0.5, size=240))
batches = {"train": (X[:160], y[:160]), "dev": (X[160:], y[160:])}


def err(w, batch):
    xb, yb = batch
    return float(np.mean(np.maximum(0.0, 1.0 - yb * (xb @ w)) ** 2))


w = np.zeros(5)
xt, yt = batches["train"]
for step in range(1, cfg.steps + 1):
    margin = np.maximum(0.0, 1.0 - yt * (xt @ w))
    w -= cfg.lr * (-(2 * margin * yt) @ xt / len(yt) + cfg.wd * w)
    metrics = {"fit_err": err(w, batches["train"])}
    if step % 10 == 0:
        metrics["check_err"] = err(w, batches["train"])
    run.log(step, **metrics)
run.finish(check_err=err(w, batches["train"]), steps=cfg.steps)
