"""The run's seed streams, as methods of sweeper.run.Run (a mixin): one named stream per source of randomness.

    g = run.generator("data_order")       # torch.Generator of one stream; run.numpy_rng("python") for numpy
    run.manual_seed("init")               # torch's global RNG from a stream, before building the model
    run.seed_all()                        # python / numpy / torch global RNGs at once

Every stream drawn is recorded (the summary's fingerprint lists them): two runs of one seed that drew data_order
share their data order, so the report pairs them. A generator counts once the run drew from it (its state moved;
sweeper.run.usage): one handed out and never used pairs nothing.
"""
from __future__ import annotations

import random
import sys


class RunSeeds:
    """Needs self.streams (sweeper.run.streams.SeedStreams) and self.streams_used (a set), set by Run.__init__, and
    RunUsage's _hand_out and _generators_drawn."""

    def seed_for(self, stream: str) -> int:
        """The seed of one named stream, an int in [0, 2**32) that np.random.seed, random.seed and
        torch.manual_seed all take as it is (recorded as used: the summary's fingerprint lists the streams drawn,
        which is what the report's paired test needs to know)."""
        value = self.streams.seed_for(stream)
        self.streams_used.add(stream)
        return value

    def generator(self, stream: str):
        """A torch.Generator seeded from one named stream (the summary records whether the run drew from it)."""
        return self._hand_out(stream, self.streams.generator(stream))

    def numpy_rng(self, stream: str):
        """A numpy.random.Generator seeded from one named stream (the summary records whether it was drawn from)."""
        return self._hand_out(stream, self.streams.numpy(stream))

    def manual_seed(self, stream: str) -> None:
        """Seed torch's global CPU (and CUDA) RNG from a stream: e.g. "init" before building the model."""
        import torch  # deferred: torch (about 2 s to import), only when this runs

        seed = self.seed_for(stream)
        torch.manual_seed(seed)
        if torch.cuda.is_initialized():
            torch.cuda.manual_seed_all(seed)

    def seed_all(self) -> None:
        """python and numpy global RNGs from the "python" stream; torch's (if imported) from "init"."""
        random.seed(self.seed_for("python"))
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed(self.seed_for("python"))
        if "torch" in sys.modules:
            self.manual_seed("init")

    def _stream_record(self) -> dict:
        """The summary's record of the seed streams drawn ("data_order,init"): two runs of one seed that drew
        data_order share their data order, so the report pairs them (not in checkpoints: a resume draws the
        streams again after loading). A stream handed out only as generators that were never drawn from is
        left out: nothing of the run came from it, so it pairs nothing."""
        used = self.streams_used | {s for s, drawn in self._generators_drawn().items() if drawn}
        return {"seed_streams": ",".join(sorted(used))} if used else {}

