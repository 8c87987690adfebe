"""Random ReLU features of a given width, readout by gradient descent with weight decay; JSON out."""
import json
import sys

import numpy as np

a = dict(s[2:].split("=", 1) for s in sys.argv[1:])   # --key=value, every run-config key
seed, width, wd = int(a["seed"]), int(a["width"]), float(a["wd"])
rng = np.random.default_rng(seed)
data = np.random.default_rng(13)
X = data.normal(size=(250, 3))
y = np.abs(X[:, 0]) - X[:, 1] + data.normal(scale=0.3, size=250)
H = np.maximum(0, X @ rng.normal(size=(3, width)) + rng.normal(size=width)) / np.sqrt(width)
w = np.zeros(width)
for step in range(1, 81):
    w -= 0.5 * (H[:180].T @ (H[:180] @ w - y[:180]) / 180 + wd * w)
    if step % 20 == 0:
        print(json.dumps({"step": step, "train_mse": float(np.mean((H[:180] @ w - y[:180]) ** 2))}))
print(json.dumps({"val_mse": float(np.mean((H[180:] @ w - y[180:]) ** 2))}))
