"""Minibatch logistic regression; JSON lines: train_nll on the training split, holdout_nll on the holdout."""
import json
import sys

import numpy as np
from splits import load

a = dict(s[2:].split("=", 1) for s in sys.argv[1:])   # --key=value, every run-config key
seed, lr, batch = int(a["seed"]), float(a["lr"]), int(a["batch"])
rng = np.random.default_rng(seed)
Xt, yt = load("train")
Xh, yh = load("val")


def nll(w, X, y):
    p = np.clip(1 / (1 + np.exp(-X @ w)), 1e-9, 1 - 1e-9)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


w = rng.normal(scale=0.1, size=4)
for step in range(1, 81):
    i = rng.integers(0, len(yt), size=batch)
    w -= lr * Xt[i].T @ (1 / (1 + np.exp(-Xt[i] @ w)) - yt[i]) / batch
    if step % 4 == 0:
        print(json.dumps({"step": step, "train_nll": nll(w, Xt, yt), "holdout_nll": nll(w, Xh, yh)}))
