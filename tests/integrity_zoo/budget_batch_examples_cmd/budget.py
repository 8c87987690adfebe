"""Minibatch SGD on a linear model under an example budget; JSON lines, step = examples seen."""
import json
import sys

import numpy as np

a = dict(s[2:].split("=", 1) for s in sys.argv[1:])   # --key=value, every run-config key
seed, lr, batch, examples = int(a["seed"]), float(a["lr"]), int(a["batch"]), int(a["examples"])
rng = np.random.default_rng(seed)
X = rng.normal(size=(1000, 8))
y = X @ rng.normal(size=8) + rng.normal(scale=0.5, size=1000)
w, seen = np.zeros(8), 0
for step in range(1, examples // batch + 1):
    i = rng.integers(0, 800, size=batch)
    w -= lr * X[i].T @ (X[i] @ w - y[i]) / batch
    seen += batch
    if step % 10 == 0:
        print(json.dumps({"step": seen, "train_mse": float(np.mean((X[:800] @ w - y[:800]) ** 2))}))
print(json.dumps({"step": seen, "val_mse": float(np.mean((X[800:] @ w - y[800:]) ** 2))}))
