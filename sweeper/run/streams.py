"""Seed streams and RNG states: independent random streams derived from the run seed, saved and restored whole.

    streams = SeedStreams(seed=3)
    streams.seed_for("data_order")       # -> int in [0, 2**32), stable across Python versions, machines, processes
    g = streams.generator("data_order")  # torch.Generator seeded from it
    streams.numpy("eval_batches")        # numpy.random.Generator seeded from it
    SeedStreams(seed=3, rank=1)          # rank 1's own streams of a multi-rank run (rank 0's are the ones above)
    states = capture_rng_states()        # python, numpy, torch CPU, every CUDA device: into a checkpoint
    restore_rng_states(states)           # bitwise the same random future

Separate streams make paired comparisons valid: two variants run with the same seed see the same data order,
the same validation batches and the same dropout masks even when one of them builds a different model (its
init draws come from the "init" stream only). The global torch RNG is the dropout stream after model init;
nothing in the loop reseeds it. In a multi-rank run, streams every rank must share (init, data order, eval
batches: the same model, one global data order that each rank shards) come from SeedStreams(seed); streams
each rank draws on its own (dropout) from SeedStreams(seed, rank), which for rank 0 are the shared ones.

Torch is optional: without it (or before the user's code imported it) only the python and numpy states are
captured; torch is never imported here on the user's behalf.

Test-only fault injection: SWEEPER_FAULT_DROP_RNG_STATE=torch (comma-separated names from DROPPABLE) leaves
those states out of every checkpoint written, so a resumed run keeps the fresh process's state instead. The
resume audit must then report the divergence; a loud warning is printed whenever the switch is active.
"""
from __future__ import annotations

import hashlib
import os
import random
import sys

STREAMS = ("init", "data_order", "dropout", "eval_batches", "python")
SEED_BYTES = 4          # every seed handed out is 32 bits: [0, 2**32), see SeedStreams.seed_for
DROP_ENV = "SWEEPER_FAULT_DROP_RNG_STATE"
DROPPABLE = ("python", "numpy", "torch", "cuda", "data_order")
_warned: set[str] = set()


class SeedStreams:
    def __init__(self, seed: int, rank: int = 0):
        self.seed, self.rank = int(seed), int(rank)

    def seed_for(self, stream: str) -> int:
        """The stream's seed: 32 bits, [0, 2**32), which every common consumer takes as it is (numpy's legacy
        np.random.seed and RandomState refuse 2**32 and above; random.seed, torch.manual_seed, numpy's
        default_rng, JAX's PRNGKey take it)."""
        if stream not in STREAMS:
            raise KeyError(f"unknown seed stream {stream!r}; streams are {', '.join(STREAMS)}")
        rank = f":rank{self.rank}" if self.rank else ""       # rank 0: a one-process run's streams, unchanged
        digest = hashlib.sha256(f"sweeper:{self.seed}:{stream}{rank}".encode()).digest()
        return int.from_bytes(digest[:SEED_BYTES], "little")

    def generator(self, stream: str):
        import torch  # deferred: torch (about 2 s to import), only when this runs

        g = torch.Generator(device="cpu")
        g.manual_seed(self.seed_for(stream))
        return g

    def numpy(self, stream: str):
        import numpy as np  # deferred: numpy (0.1 s), only when this runs

        return np.random.default_rng(self.seed_for(stream))


def _torch():
    """torch when the process already imported it (a user's torch-free code never pays for it)."""
    return sys.modules.get("torch")


def _numpy():
    try:
        import numpy  # deferred: numpy (0.1 s), only when this runs
    except ImportError:  # pragma: no cover - numpy is a dependency
        return None
    return numpy


def dropped_states() -> frozenset[str]:
    """RNG states the test-only fault switch leaves out of checkpoints (empty in normal runs)."""
    raw = os.environ.get(DROP_ENV, "").strip()
    if not raw:
        return frozenset()
    names = frozenset(n.strip() for n in raw.split(",") if n.strip())
    bad = sorted(names - set(DROPPABLE))
    if bad:
        raise ValueError(f"{DROP_ENV}={raw!r}: unknown state {bad[0]!r}; accepted names are {', '.join(DROPPABLE)}")
    if raw not in _warned:
        _warned.add(raw)
        print(f"WARNING: fault injection {DROP_ENV}={raw}: checkpoints leave out the {', '.join(sorted(names))} "
              "RNG state; resumed runs will NOT be bitwise equal (test-only switch)", file=sys.stderr, flush=True)
    return names


def capture_rng_states(for_checkpoint: bool = True) -> dict:
    """The global RNG states: python, numpy, torch CPU and one per visible CUDA device. With for_checkpoint,
    states named by the test-only fault switch are left out (the audit's own hashes pass False)."""
    np, torch = _numpy(), _torch()
    states = {"python": random.getstate()}
    if np is not None:
        states["numpy"] = np.random.get_state()
    if torch is not None:
        states["torch"] = torch.get_rng_state()
        states["cuda"] = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else []
    for name in dropped_states() if for_checkpoint else ():
        states.pop(name, None)
    return states


def restore_rng_states(states: dict) -> None:
    """Restore what `capture_rng_states` saved. CUDA states go back to the device they came from (index i to
    device i); the fingerprint guarantees the same device model and count, so none is spread to the others."""
    if "python" in states:
        random.setstate(states["python"])
    if "numpy" in states:
        _numpy().random.set_state(states["numpy"])
    if "torch" not in states and "cuda" not in states:
        return
    import torch  # deferred: torch (about 2 s to import), only when this runs

    if "torch" in states:
        torch.set_rng_state(states["torch"])
    cuda = states.get("cuda") or []
    if cuda:
        if len(cuda) != torch.cuda.device_count():
            raise RuntimeError(f"the checkpoint holds CUDA RNG states for {len(cuda)} devices, this process sees "
                               f"{torch.cuda.device_count()}: run with the same CUDA_VISIBLE_DEVICES count")
        for index, state in enumerate(cuda):
            torch.cuda.set_rng_state(state, device=index)
