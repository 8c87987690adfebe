"""A script configured by its own YAML file (--config path): logistic regression; JSON lines out."""
import argparse
import json

import numpy as np
import yaml


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


p = argparse.ArgumentParser()
p.add_argument("--config", required=True)
cfg = yaml.safe_load(open(p.parse_args().config))

X, y = make_data(400, 10)
Xtr, ytr, Xva, yva = X[:300], y[:300], X[300:], y[300:]
rng = np.random.default_rng(cfg["seed"])
w = rng.normal(scale=0.5, size=10)
for epoch in range(cfg["epochs"]):
    for idx in np.array_split(rng.permutation(300), 10):
        w -= cfg["optim"]["lr"] * grad(w, Xtr[idx], ytr[idx], cfg["optim"]["l2"])
    print(json.dumps({"step": epoch + 1, "train_loss": nll(w, Xtr, ytr), "val_loss": nll(w, Xva, yva)}))
print(json.dumps({"val_loss": nll(w, Xva, yva)}))
