"""Random tanh features (width x depth) with a readout fitted by gradient descent; run API."""
import numpy as np

import sweeper

run = sweeper.init()
a = run.config.arch

rng = np.random.default_rng(run.seed_for("init"))
data = np.random.default_rng(12)
X = data.normal(size=(300, 4))
y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + data.normal(scale=0.2, size=300)
H = X
for _ in range(a.depth):
    H = np.tanh(H @ rng.normal(size=(H.shape[1], a.width)) / np.sqrt(H.shape[1]))
w = np.zeros(a.width)

for step in range(1, 61):
    w -= a.lr * H[:200].T @ (H[:200] @ w - y[:200]) / 200
    if step % 10 == 0:
        run.log(step, train_mse=float(np.mean((H[:200] @ w - y[:200]) ** 2)))
run.finish(val_mse=float(np.mean((H[200:] @ w - y[200:]) ** 2)), steps=60)
