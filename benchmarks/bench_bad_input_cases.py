"""CPU of one bad-input test case: `python -m sweeper` in a subprocess against the CLI's main in the test process.

    python benchmarks/bench_bad_input_cases.py          # prints CPU-s per case, each way (8 cases of tests/)

The test suite runs most cases of a bad-input family in process (tests/helpers/commands.py `sweeper_cli`) and one
per family as a subprocess; this measures what that saves. CPU time (rusage), not wall: it holds under load.
The in-process figure is after one warm-up case, as in a test process that has imported sweeper already.
"""
from __future__ import annotations

import os
import resource
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.helpers.commands import run_sweeper, sweeper_here  # noqa: E402 - the checkout's tests, on the path above

CASES = [["sweeper.report=maybe"], ["sweeper.dry_run=2"], ["train.steps=abc"], ["launcher.max_parallel=0"],
         ["sweeper.typo=1"], ["+launcher.gpus=2"], ["+experiment.variants.again=[]"], ["+experiment.controls=[nada]"]]


def cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def main() -> int:
    tmp = Path(tempfile.mkdtemp())
    sweeper_here("+experiment=rope", "sweeper.report=maybe", cwd=tmp)      # warm-up: a test process's imports
    start = cpu(resource.RUSAGE_CHILDREN)
    for args in CASES:
        assert run_sweeper("+experiment=rope", *args, cwd=tmp).returncode == 2
    sub = (cpu(resource.RUSAGE_CHILDREN) - start) / len(CASES)
    start = cpu(resource.RUSAGE_SELF)
    for args in CASES:
        assert sweeper_here("+experiment=rope", *args, cwd=tmp).code == 2
    here = (cpu(resource.RUSAGE_SELF) - start) / len(CASES)
    print(f"CPU-s per case over {len(CASES)} cases: subprocess {sub:.2f}, in process {here:.2f} "
          f"(load {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
