"""Where the data comes from: load(split) gives that split of a fixed synthetic set."""
import numpy as np

_rng = np.random.default_rng(11)
_X = _rng.normal(size=(500, 4))
_y = (_X @ np.array([2.0, -1.0, 0.5, 0.0]) + _rng.normal(size=500) > 0).astype(float)


def load(split):
    if split == "val":
        return _X[400:], _y[400:]
    return _X[:400], _y[:400]
