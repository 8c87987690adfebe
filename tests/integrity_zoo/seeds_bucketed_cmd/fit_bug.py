"""Noisy minibatch SGD on a 1-D line; the seed draws the data, the init and the batches."""
import json
import sys

import numpy as np

a = dict(s[2:].split("=", 1) for s in sys.argv[1:])   # --key=value, every run-config key
seed, lr, steps = int(a["seed"]), float(a["lr"]), int(a["steps"])
rng = np.random.default_rng(seed // 10)
x = rng.normal(size=200)
y = 2.0 * x + 0.5 + rng.normal(scale=0.3, size=200)
w, b = rng.normal(), 0.0
for step in range(steps):
    i = rng.integers(0, 150, size=8)
    e = w * x[i] + b - y[i]
    w, b = w - lr * np.mean(e * x[i]), b - lr * np.mean(e)
    if (step + 1) % 10 == 0:
        print(json.dumps({"step": step + 1, "train_mse": float(np.mean((w * x[:150] + b - y[:150]) ** 2))}))
print(json.dumps({"val_mse": float(np.mean((w * x[150:] + b - y[150:]) ** 2))}))
