"""Softmax regression by minibatch SGD on a 4000-example training split; run API."""
import numpy as np

import sweeper

run = sweeper.init()
cfg = run.config
data = np.random.default_rng(19)
X = data.normal(size=(4500, 5))
y = np.argmax(X @ data.normal(size=(5, 3)) + data.normal(size=(4500, 3)), axis=1)
Xt, yt = X[:4000], y[:4000]

rng = run.numpy_rng("data_order")
W = np.zeros((5, 3))


def probs(X, W):
    z = X @ W
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


for step in range(1, 61):
    i = rng.integers(0, len(yt), size=32)
    P = probs(Xt[i], W)
    P[np.arange(32), yt[i]] -= 1
    W -= cfg.lr * Xt[i].T @ P / 32
    if step % 20 == 0:
        run.log(step, train_nll=float(-np.mean(np.log(probs(Xt, W)[np.arange(len(yt)), yt]))))
P = probs(X[4000:], W)
run.finish(val_nll=float(-np.mean(np.log(P[np.arange(500), y[4000:]]))), steps=60)
