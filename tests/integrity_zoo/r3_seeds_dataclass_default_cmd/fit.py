"""Logistic regression by mini-batch SGD, configured by a dataclass built from argparse; JSON lines out."""
import argparse
import json
from dataclasses import dataclass

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


@dataclass
class TrainConfig:
    lr: float = 0.1
    l2: float = 0.0
    epochs: int = 12
    batch: int = 32
    seed: int = 0


p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, required=True)
p.add_argument("--lr", type=float, default=0.1)
p.add_argument("--l2", type=float, default=0.0)
args = p.parse_args()
cfg = TrainConfig(lr=args.lr, l2=args.l2, seed=args.seed)

X, y = make_data(500, 12)
Xtr, ytr, Xva, yva = X[:350], y[:350], X[350:], y[350:]
rng = np.random.default_rng(cfg.seed)
w = rng.normal(scale=0.5, size=12)
for epoch in range(cfg.epochs):
    for idx in np.array_split(rng.permutation(350), 350 // cfg.batch):
        w -= cfg.lr * grad(w, Xtr[idx], ytr[idx], cfg.l2)
    print(json.dumps({"step": epoch + 1, "train_loss": nll(w, Xtr, ytr), "val_loss": nll(w, Xva, yva)}))
print(json.dumps({"val_loss": nll(w, Xva, yva)}))
