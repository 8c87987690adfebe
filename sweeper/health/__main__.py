"""`python -m sweeper.health` runs the documented example (the module docstring of sweeper.health) and prints
its report; `python -m sweeper.health PATH...` prints the health table of each health.json or run dir given.
"""
from __future__ import annotations

import doctest
import os
import sys
from pathlib import Path

import sweeper.health as health
from sweeper.health.result import HealthReport


def main(argv: list[str]) -> int:
    if not argv:
        result = doctest.testmod(health, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        print(f"sweeper.health example: {result.attempted} statements, {result.failed} failed")
        return 1 if result.failed else 0
    status = 0
    for arg in argv:
        path = Path(arg)
        path = path / "health.json" if path.is_dir() else path
        if not path.is_file():
            print(f"{arg}: no health.json here (expected a run dir or a health.json file)", file=sys.stderr)
            status = 2
            continue
        try:
            report = HealthReport.read(path)
        except (ValueError, OSError) as e:      # damaged, not UTF-8, unreadable: one line naming the file
            if os.environ.get("SWEEPER_DEBUG", "") not in ("", "0"):
                raise
            print(f"sweeper.health: error: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
                  + (f" ({path})" if str(path) not in str(e) else ""), file=sys.stderr)
            status = 2 if isinstance(e, ValueError) else max(status, 1)
            continue
        print(f"== {path}")
        print(report)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
