"""A 3-class softmax regression with a temperature; run API (val_nll nan when the temperature is 0)."""
import numpy as np

import sweeper

run = sweeper.init()
cfg = run.config
rng = np.random.default_rng(run.seed_for("init"))
X = rng.normal(size=(300, 4))
y = np.argmax(X @ rng.normal(size=(4, 3)) + rng.normal(scale=0.5, size=(300, 3)), axis=1)
W = np.zeros((4, 3))


def probs(X, W):
    with np.errstate(all="ignore"):
        z = X @ W / cfg.temperature
        z = z - z.max(1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(1, keepdims=True)


for step in range(1, 41):
    P = probs(X[:200], W)
    P[np.arange(200), y[:200]] -= 1
    W -= 0.5 * X[:200].T @ P / 200
    if step % 10 == 0:
        run.log(step, train_nll=float(-np.mean(np.log(probs(X[:200], W)[np.arange(200), y[:200]]))))
P = probs(X[200:], W)
run.finish(val_nll=float(-np.mean(np.log(P[np.arange(100), y[200:]]))), steps=40)
