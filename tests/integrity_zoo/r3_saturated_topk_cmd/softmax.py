"""Softmax regression on 3 classes; reports the validation top-k accuracy; JSON out."""
import argparse
import json

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, required=True)
p.add_argument("--lr", type=float, default=0.1)
p.add_argument("--topk", type=int, default=1)
a = p.parse_args()
g = np.random.default_rng(2)
X = g.normal(size=(3600, 6))
y = np.argmax(X @ g.normal(size=(6, 3)) + g.normal(scale=1.5, size=(3600, 3)), 1)
Xtr, ytr, Xva, yva = X[:600], y[:600], X[600:], y[600:]
rng = np.random.default_rng(a.seed)
W = rng.normal(scale=0.3, size=(6, 3))
for epoch in range(4):
    for idx in np.array_split(rng.permutation(600), 12):
        z = Xtr[idx] @ W
        p_ = np.exp(z - z.max(1, keepdims=True))
        p_ /= p_.sum(1, keepdims=True)
        W -= a.lr * Xtr[idx].T @ (p_ - np.eye(3)[ytr[idx]]) / len(idx)
top = np.argsort(-(Xva @ W), 1)[:, :a.topk]
print(json.dumps({"val_topk_acc": float(np.mean((top == yva[:, None]).any(1)))}))
