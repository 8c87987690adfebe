"""Focal-loss logistic regression on the run API; the loss lives in the project's losses.py."""
import numpy as np

import sweeper


def main():
    from losses import focal_grad, nll
    run = sweeper.init()
    cfg = run.config
    g = np.random.default_rng(7)
    X = g.normal(size=(500, 10))
    y = (X @ g.normal(size=10) + g.normal(size=500) > 0).astype(float)
    Xtr, ytr, Xva, yva = X[:300], y[:300], X[300:], y[300:]
    rng = run.numpy_rng("data_order")
    w = run.numpy_rng("init").normal(scale=0.5, size=10)
    for epoch in range(1, 9):
        for idx in np.array_split(rng.permutation(300), 10):
            w -= cfg.lr * focal_grad(w, Xtr[idx], ytr[idx])
        run.log(epoch, train_loss=nll(w, Xtr, ytr), val_loss=nll(w, Xva, yva))
    run.finish(val_loss=nll(w, Xva, yva))


if __name__ == "__main__":
    main()
