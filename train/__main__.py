"""`python -m train RUN_DIR`: train the run described by RUN_DIR/config.yaml (resuming if it has checkpoints).

Exit status: 0 finished (or diverged, recorded in status.json), 75 stopped by a signal with a checkpoint saved
(run again to resume), 2 bad config or refused resume, 1 crash (traceback in the log, status "failed").
"""
from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print("usage: python -m train RUN_DIR   (RUN_DIR/config.yaml describes the run)", file=sys.stderr)
        return 2
    run_dir = Path(argv[0])
    import yaml

    from train.atomic import atomic_write_json, read_json
    from train.config import ConfigError

    try:
        cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    except OSError as e:
        print(f"train: error: cannot read {run_dir / 'config.yaml'}: {e.strerror}", file=sys.stderr)
        return 2
    try:
        from train.checkpoint import FingerprintMismatch
        from train.loop import EXIT_INTERRUPTED, run

        summary = run(cfg, run_dir)
        return EXIT_INTERRUPTED if summary["status"] == "interrupted" else 0
    except (ConfigError, FingerprintMismatch) as e:
        _fail(run_dir, str(e), 2, atomic_write_json, read_json)
        print(f"train: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:
        traceback.print_exc()
        _fail(run_dir, f"{type(e).__name__}: {e}", 1, atomic_write_json, read_json)
        return 1


def _fail(run_dir: Path, error: str, code: int, write, read) -> None:
    status = read(run_dir / "status.json", {}) or {}
    status.update(status="failed", error=error, exit_code=code, ended=time.time())
    write(run_dir / "status.json", status)


if __name__ == "__main__":
    sys.exit(main())
