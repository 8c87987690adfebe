"""A minimal batch loader."""
import numpy as np


class Loader:
    def __init__(self, n, batch, rng=None, shuffle=False):
        self.n, self.batch, self.rng, self.shuffle = n, batch, rng, shuffle

    def __iter__(self):
        order = self.rng.permutation(self.n) if self.shuffle else np.arange(self.n)
        return iter(np.array_split(order, self.n // self.batch))
