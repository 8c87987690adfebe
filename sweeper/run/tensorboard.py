"""TensorBoard event files for `run.log` (optional extra: `pip install 'seed-sweeper[tensorboard]'`, tensorboardX).

    tb = TensorBoardLog(run_dir / "tensorboard", "rope", "nope", seed=0, purge_step=None)
    tb.log({"step": 10, "train_loss": 3.2})     # one scalar per numeric field
    tensorboard --logdir SWEEP_DIR              # every run of the sweep, named runs/<variant>/seed_<k>/tensorboard

Each run's writer is tagged with its experiment, variant and seed (a text summary "sweeper/run" and the event
file's suffix). A resumed run purges the events logged after its checkpoint, as the metrics file does.
"""
from __future__ import annotations

import math
from pathlib import Path


class TensorBoardLog:
    def __init__(self, log_dir: Path, experiment: str, variant: str, seed: int, purge_step: int | None = None):
        try:
            from tensorboardX import SummaryWriter  # deferred: tensorboardX, an optional extra, only when this runs
        except ImportError:
            raise RuntimeError(
                "sweeper.tensorboard=true needs tensorboardX: pip install 'seed-sweeper[tensorboard]'"
            ) from None
        self.writer = SummaryWriter(
            logdir=str(log_dir),
            purge_step=purge_step,
            flush_secs=10,
            filename_suffix=f".{experiment}.{variant}.seed{seed}",
        )
        self.writer.add_text("sweeper/run", f"experiment={experiment} variant={variant} seed={seed}", 0)

    def log(self, record: dict) -> None:
        step = record["step"]
        for key, value in record.items():
            if (
                key != "step"
                and isinstance(value, (int, float))
                and not isinstance(value, bool)
                and math.isfinite(value)
            ):
                self.writer.add_scalar(key, value, step)

    def close(self) -> None:
        self.writer.close()
