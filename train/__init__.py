"""Training code: one run of a small character-level transformer, deterministic and resumable.

    python -m train RUN_DIR               # trains RUN_DIR/config.yaml
    summary = train.run(cfg, run_dir)     # the same, in-process

Importing `train` stays light (no torch) so the sweeper parent can use `train.config` and `train.atomic`.
"""


def run(cfg, run_dir):
    from train.loop import run as _run

    return _run(cfg, run_dir)
