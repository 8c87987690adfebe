"""`python -m sweeper.train RUN_DIR`: train the run described by RUN_DIR/config.yaml (resuming if it has checkpoints).

The same as `python -m sweeper.run sweeper.train:main RUN_DIR` (sweeper.run.entry). Exit status: 0 finished (or
diverged, or already finished), 75 stopped by a signal with a checkpoint saved (run again to resume), 2 bad
config or refused resume, 1 crash (traceback in the log, the run failed).
"""
from __future__ import annotations

import sys

from sweeper.run.entry import main as run_main  # the boundary of python -m sweeper.run


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print("usage: python -m sweeper.train RUN_DIR   (RUN_DIR/config.yaml describes the run)", file=sys.stderr)
        return 2
    return run_main(["sweeper.train:main", argv[0]])


if __name__ == "__main__":
    sys.exit(main())
