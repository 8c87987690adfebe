"""Seed streams: independent random streams derived from the run seed, one per purpose.

    streams = SeedStreams(seed=3)
    streams.seed_for("data_order")     # -> int, stable across Python versions and processes
    g = streams.generator("data_order")  # torch.Generator seeded from it

Separate streams make paired comparisons valid: two variants run with the same seed see the same data order
and the same validation batches even when one of them builds a different model (different init draws).
"""
from __future__ import annotations

import hashlib

STREAMS = ("init", "data_order", "dropout", "eval_batches", "python")


class SeedStreams:
    def __init__(self, seed: int):
        self.seed = int(seed)

    def seed_for(self, stream: str) -> int:
        if stream not in STREAMS:
            raise KeyError(f"unknown seed stream {stream!r}; streams are {', '.join(STREAMS)}")
        digest = hashlib.sha256(f"sweeper:{self.seed}:{stream}".encode()).digest()
        return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)

    def generator(self, stream: str):
        import torch

        g = torch.Generator(device="cpu")
        g.manual_seed(self.seed_for(stream))
        return g
