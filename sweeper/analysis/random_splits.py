"""The fixed-seed random splits of the independent permutation test, drawn once per (n, n_a, seed) and summed in
blocks of rows, so 10,000 splits of 5,000 pooled values never become one 400 MB float matrix.

    from sweeper.analysis import random_splits
    sa, qa = random_splits.sums(x, na, rows=10_001, seed=0)   # (rows,) sums of x and of x*x over arm a
    member = random_splits.matrix(n, na, rows=1_001, seed=0)   # the same splits as a 0/1 float matrix

Row 0 is the observed split (the first na values to arm a); row r >= 1 is the r-th draw of
`np.random.default_rng(seed).permuted(arange(n) broadcast to (B, n), axis=1)[:, :na]`. permuted shuffles the rows
in order from one generator, so the first B rows are the same draws whatever B is asked for: a request for 1,001
rows (the interval search) is the head of the 10,001 the decision used, drawn once. The rows are kept as uint8
(n bytes a row) and turned into floats a block at a time for the products; a block's product gives each row the
same bits as the whole matrix's product (tests/test_robust.py checks it on this machine's BLAS).
"""
from __future__ import annotations

import functools
import threading

import numpy as np

BLOCK = 1024            # rows per block (the first holds the observed split); 1,001-row requests are one block


class _Splits:
    """The rows drawn so far for one (n, na, seed), extended on demand from the same generator."""

    def __init__(self, n: int, na: int, seed: int):
        self.n, self.na = n, na
        self.rng = np.random.default_rng(seed)
        self.base = np.arange(n, dtype=np.int16 if n < 2**15 else np.int64)
        self.blocks: list[np.ndarray] = []
        self.head: np.ndarray | None = None     # block 0 as floats: the interval search reuses it ~25 times
        self.rows = 0
        self.lock = threading.Lock()

    def _draw(self, k: int, observed: bool) -> np.ndarray:
        block = np.zeros((k, self.n), dtype=np.uint8)
        first = 1 if observed else 0
        if observed:
            block[0, :self.na] = 1
        order = self.rng.permuted(np.broadcast_to(self.base, (k - first, self.n)), axis=1)[:, :self.na]
        block[np.arange(first, k)[:, None], order] = 1
        return block

    def upto(self, rows: int) -> list[np.ndarray]:
        """Blocks covering at least `rows` rows (row 0 the observed split)."""
        with self.lock:
            while self.rows < rows:
                block = self._draw(BLOCK, observed=not self.blocks)
                self.blocks.append(block)
                self.rows += block.shape[0]
            return list(self.blocks)


@functools.lru_cache(maxsize=8)
def _splits(n: int, na: int, seed: int) -> _Splits:
    return _Splits(n, na, seed)


def _row_blocks(n: int, na: int, rows: int, seed: int):
    splits = _splits(n, na, seed)
    blocks = splits.upto(rows)
    if splits.head is None:
        splits.head = blocks[0].astype(np.float64)
        splits.head.setflags(write=False)
    left = rows
    for i, block in enumerate(blocks):
        if left <= 0:
            return
        yield (splits.head if i == 0 else block)[:left].astype(np.float64, copy=False)
        left -= block.shape[0]


def sums(x: np.ndarray, na: int, rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(member @ x, member @ (x * x)) for the first `rows` splits of x.size values, block by block."""
    x2 = x * x
    sa, qa = [], []
    for member in _row_blocks(x.size, na, rows, seed):
        sa.append(member @ x)
        qa.append(member @ x2)
    return np.concatenate(sa), np.concatenate(qa)


def matrix(n: int, na: int, rows: int, seed: int) -> np.ndarray:
    """The first `rows` splits as one 0/1 float matrix (rows, n), read-only (benchmarks; small n)."""
    member = np.concatenate(list(_row_blocks(n, na, rows, seed)))
    member.setflags(write=False)
    return member
