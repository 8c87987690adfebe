"""Losses of the project: the log loss and a focal-weighted gradient."""
import numpy as np

GAMMA = 2.0


def _p(w, X):
    return np.clip(1.0 / (1.0 + np.exp(-np.clip(X @ w, -30, 30))), 1e-7, 1 - 1e-7)


def nll(w, X, y):
    p = _p(w, X)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def focal_grad(w, X, y):
    p = _p(w, X)
    pt = np.where(y > 0.5, p, 1 - p)
    return X.T @ ((p - y) * (1 - pt) ** GAMMA) / len(y)
