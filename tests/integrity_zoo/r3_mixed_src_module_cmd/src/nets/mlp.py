"""A one-hidden-layer network in numpy (forward and backward), the project's model module."""
import numpy as np


def act(z):
    return np.tanh(z)


def act_grad(z):
    return 1.0 - np.tanh(z) ** 2


def init(rng, d, h):
    return {"W1": rng.normal(scale=1 / np.sqrt(d), size=(d, h)), "W2": rng.normal(scale=1 / np.sqrt(h), size=h)}


def forward(p, X):
    z = X @ p["W1"]
    return z, act(z) @ p["W2"]


def step(p, X, y, lr):
    z, out = forward(p, X)
    err = (out - y) / len(y)
    gW2 = act(z).T @ err
    gW1 = X.T @ (np.outer(err, p["W2"]) * act_grad(z))
    p["W1"] -= lr * gW1
    p["W2"] -= lr * gW2
