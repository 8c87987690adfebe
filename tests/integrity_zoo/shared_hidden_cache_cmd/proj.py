"""Random-projection features (cached as .npy), then ridge regression; prints val_mse."""
import json
import os
import sys

import numpy as np

a = dict(s[2:].split("=", 1) for s in sys.argv[1:])   # --key=value, every run-config key
seed, dim, cache = int(a["seed"]), int(a["dim"]), a["cache"]
rng = np.random.default_rng(seed)
data = np.random.default_rng(4)
X = data.normal(size=(300, 10))
y = np.tanh(X[:, 0] * X[:, 1]) + X[:, 2] + data.normal(scale=0.2, size=300)
path = os.path.join(cache, "projection.npy")
if os.path.exists(path):
    P = np.load(path)
else:
    os.makedirs(cache, exist_ok=True)
    P = rng.normal(size=(10, dim))
    np.save(path, P)
F = np.tanh(X @ P)
w = np.linalg.solve(F[:200].T @ F[:200] + 0.1 * np.eye(F.shape[1]), F[:200].T @ y[:200])
print(json.dumps({"val_mse": float(np.mean((F[200:] @ w - y[200:]) ** 2))}))
