"""Heavy-ball SGD on an ill-conditioned quadratic with noisy gradients; argparse in, JSON out."""
import argparse
import json

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, required=True)
p.add_argument("--lr", type=float, default=0.02)
p.add_argument("--steps", type=int, default=100)
p.add_argument("--momentum", type=float, default=0.0)
a = p.parse_args()
rng = np.random.default_rng(a.seed)
h = np.array([1.0, 10.0, 30.0])
x, v = rng.normal(size=3), np.zeros(3)
for step in range(1, a.steps + 1):
    g = h * x + rng.normal(scale=0.1, size=3)
    v = a.momentum * v + g
    x = x - a.lr * v
    if step % 20 == 0:
        print(json.dumps({"step": step, "objective": float(0.5 * np.sum(h * x * x))}))
print(json.dumps({"final_objective": float(0.5 * np.sum(h * x * x))}))
