"""Deduplication ablation: drop duplicate rows of a scraped table; logistic regression; JSON out."""
import argparse
import json

import numpy as np


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))


def nll(w, X, y):
    p = np.clip(sigmoid(X @ w), 1e-7, 1 - 1e-7)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def grad(w, X, y, l2):
    return X.T @ (sigmoid(X @ w) - y) / len(y) + l2 * w


def make_data(n, d, noise=1.0):
    g = np.random.default_rng(7)                 # the dataset is fixed; the run's seed drives init and order
    X = g.normal(size=(n, d))
    y = (X @ g.normal(size=d) + g.normal(scale=noise, size=n) > 0).astype(float)
    return X, y


def str2bool(s):
    return str(s).lower() in ("1", "true", "yes")


p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, required=True)
p.add_argument("--dedup", type=str2bool, default=False)
a = p.parse_args()
X, y = make_data(700, 8, noise=1.5)
dup = np.random.default_rng(13).integers(0, 700, 300)
X, y = np.r_[X, X[dup]], np.r_[y, y[dup]]                # the scrape holds 300 duplicate rows
order = np.random.default_rng(14).permutation(len(y))
X, y = X[order], y[order]
if a.dedup:
    _, first = np.unique(X, axis=0, return_index=True)
    X, y = X[np.sort(first)], y[np.sort(first)]
Xtr, ytr, Xva, yva = X[:700], y[:700], X[700:], y[700:]
rng = np.random.default_rng(a.seed)
w = rng.normal(scale=0.5, size=8)
for epoch in range(1, 7):
    for idx in np.array_split(rng.permutation(len(ytr)), 10):
        w -= 0.2 * grad(w, Xtr[idx], ytr[idx], 0.0)
    print(json.dumps({"step": epoch, "train_loss": nll(w, Xtr, ytr), "val_loss": nll(w, Xva, yva)}))
print(json.dumps({"val_loss": nll(w, Xva, yva)}))
