"""Regression with the project's MLP module (src/nets/mlp.py, put on sys.path); JSON lines out."""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "src"))
from nets import mlp  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, required=True)
p.add_argument("--hidden", type=int, default=16)
a = p.parse_args()
g = np.random.default_rng(6)
X = g.uniform(-2, 2, size=(400, 3))
y = np.sin(X[:, 0]) * X[:, 1] + 0.1 * g.normal(size=400)
Xtr, ytr, Xva, yva = X[:300], y[:300], X[300:], y[300:]
rng = np.random.default_rng(a.seed)
params = mlp.init(rng, 3, a.hidden)
for epoch in range(1, 11):
    for idx in np.array_split(rng.permutation(300), 10):
        mlp.step(params, Xtr[idx], ytr[idx], 0.1)
    val = float(np.mean((mlp.forward(params, Xva)[1] - yva) ** 2))
    print(json.dumps({"step": epoch, "train_loss": float(np.mean((mlp.forward(params, Xtr)[1] - ytr) ** 2)),
                      "val_loss": val}))
print(json.dumps({"val_loss": val}))
