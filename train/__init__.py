"""The built-in trainer: a small character-level transformer, deterministic and resumable, on the run API
(sweeper.run.init, run.log, run.finish) as a user's training code is; being sweeper's own demo, it also reuses the
run layer's RNG streams (sweeper.run.streams), version record (sweeper.run.observed.envinfo) and file helpers
(sweeper.run.files) for its bitwise resume and the resume audit.

    python -m sweeper.run sweeper.train:main RUN_DIR      # what a sweep launches (conf/task/train.yaml: task.entry)
    python -m sweeper.train RUN_DIR                       # the same
    summary = train.run(cfg, run_dir)             # in-process: sweeper.run.init(run_dir, config=cfg) + main(run)

Importing `train` stays light (no torch): the sweeper parent imports `sweeper.train.config` for its validate hook.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from sweeper.run import ConfigError, FingerprintMismatch, init
from sweeper.train.config import RunConfig


def main(run, on_step=None) -> dict:
    """The entry point `sweeper.train:main`: train `run` (a sweeper.run.Run) and end it with run.finish, run.diverged
    or run.interrupt; returns the run's summary."""
    from sweeper.train.loop import main as train_main  # deferred: torch (about 2 s); the plan-time hooks
    #                                                     (sweeper.train.checks) import this package without it

    return train_main(run, on_step)


def run(cfg: Mapping[str, Any], run_dir: str | Path, on_step=None) -> dict:
    """Train one run in `run_dir` in this process (resuming from its checkpoints); returns its summary.
    A bad config raises train.config.ConfigError before the run dir is touched; a crash is recorded as the
    run's failure and raised."""
    config = cfg.to_dict() if isinstance(cfg, RunConfig) else dict(cfg)
    RunConfig.from_dict(config)
    r = init(run_dir, config=config, record_crashes=False)
    if r.finished:
        return r.dir.read_summary().to_dict()
    try:
        return main(r, on_step)
    except Exception as e:
        if r.outcome is None and isinstance(e, (ConfigError, FingerprintMismatch)):
            r.fail(str(e), 2)
        elif r.outcome is None:
            r.fail(f"{type(e).__name__}: {e}".splitlines()[0], 1)
        raise
    finally:
        r.close()
