"""Nearest-centroid classifier with a learned feature scale; prints the holdout accuracy."""
import json
import sys

import numpy as np

a = dict(s[2:].split("=", 1) for s in sys.argv[1:])   # --key=value, every run-config key
seed, n_val, scale = int(a["seed"]), int(a["n_val"]), float(a["scale"])
rng = np.random.default_rng(seed)
X = rng.normal(size=(200 + n_val, 6)) * scale
y = (X[:, 0] + 0.7 * X[:, 1] + rng.normal(scale=1.2, size=len(X)) > 0).astype(int)
c0, c1 = X[:200][y[:200] == 0].mean(0), X[:200][y[:200] == 1].mean(0)
pred = (np.linalg.norm(X[200:] - c1, axis=1) < np.linalg.norm(X[200:] - c0, axis=1)).astype(int)
print(json.dumps({"val_acc": float(np.mean(pred == y[200:]))}))
