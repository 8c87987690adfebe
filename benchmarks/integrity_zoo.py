"""The integrity zoo's catch table: every bug/healthy-twin pair of tests/integrity_zoo/ through the real CLI.

    python benchmarks/integrity_zoo.py --workers 2                       # all pairs -> benchmarks/results/
    python benchmarks/integrity_zoo.py --workers 2 --only seeds_ --label before

Per class: bugs caught by the check that names their cause, caught by another check only, missed; false alarms
on the healthy twins (a verdict changed, or a check of the bug's class named). Each pair sweeps its bug and its
twin in fresh copies of its folder (tests/helpers/integrity_zoo.py); `--workers` pairs run at once. Writes
<out>/integrity_zoo.json and integrity_zoo.md (with `--label L`: integrity_zoo_L.*).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from benchmarks._results import write_results  # noqa: E402
from tests.helpers.integrity_zoo import load_cases, run_pair  # noqa: E402


def _one(case):
    with tempfile.TemporaryDirectory(prefix=f"zoo-{case.name}-") as work:
        try:
            return run_pair(case, Path(work))
        except Exception as exc:  # a pair that could not run is reported as such, the others go on
            return exc


def row(o) -> dict:
    """One pair's outcome as a row of the result file."""
    return {"pair": o.case.name, "class": o.case.klass, "api": o.case.api, "expect": list(o.case.expect),
            "caught": o.caught, "named": o.bug_checks, "false_alarms": o.false_alarms,
            "twin_warnings": o.twin_warnings, "seconds": round(o.seconds, 1)}


def table(rows: list[dict], errors: dict) -> tuple[dict, list[str]]:
    """The catch table (per class) and the per-pair rows, as a result dict and Markdown lines."""
    per = defaultdict(lambda: {"pairs": 0, "cause": 0, "other": 0, "missed": 0, "false_alarms": 0})
    for r in rows:
        c = per[r["class"]]
        c["pairs"] += 1
        c[r["caught"]] += 1
        c["false_alarms"] += bool(r["false_alarms"])
    n = len(rows)
    total = {k: sum(c[k] for c in per.values()) for k in ("pairs", "cause", "other", "missed", "false_alarms")}
    lines = ["| class | pairs | caught by cause | by another check | missed | twins with a false alarm |",
             "|---|---|---|---|---|---|"]
    for k in sorted(per):
        c = per[k]
        lines.append(f"| {k} | {c['pairs']} | {c['cause']} | {c['other']} | {c['missed']} | {c['false_alarms']} |")
    lines.append(f"| **all** | {total['pairs']} | {total['cause']} ({100 * total['cause'] / max(n, 1):.0f}%) | "
                 f"{total['other']} | {total['missed']} | {total['false_alarms']} |")
    lines += ["", "| pair | api | expected | bug: caught | checks named on the bug | twin: false alarms | "
              "twin: other warnings | s |", "|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: r["pair"]):
        lines.append(f"| {r['pair']} | {r['api']} | {', '.join(r['expect'])} | {r['caught']} | "
                     f"{', '.join(r['named']) or '-'} | {'; '.join(r['false_alarms']) or '-'} | "
                     f"{'; '.join(r['twin_warnings']) or '-'} | {r['seconds']} |")
    for name, err in sorted(errors.items()):
        lines.append(f"| {name} | | | ERROR | {str(err).splitlines()[0][:200]} | | | |")
    result = {"classes": dict(per), "total": total, "pairs": rows, "errors": {k: str(v) for k, v in errors.items()}}
    return result, lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2, help="pairs run at once (default 2)")
    p.add_argument("--only", action="append", default=[], help="pairs whose name contains this (repeatable)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"), help="folder of the results")
    p.add_argument("--label", default="", help="suffix of the result files (e.g. before)")
    p.add_argument("--update", action="store_true",
                   help="replace only the rows of the pairs run now in the existing result file (after a fix)")
    args = p.parse_args(argv)
    if args.workers < 1:
        p.error(f"--workers {args.workers}: accepted values are integers >= 1, e.g. 2")
    cases = [c for c in load_cases() if not args.only or any(s in c.name for s in args.only)]
    if not cases:
        p.error(f"--only {args.only}: no pair of tests/integrity_zoo/ matches")
    load = os.getloadavg()[0]
    t = time.perf_counter()
    with ThreadPoolExecutor(args.workers) as pool:
        results = list(pool.map(_one, cases))
    wall = time.perf_counter() - t
    rows = [row(r) for r in results if not isinstance(r, Exception)]
    errors = {c.name: r for c, r in zip(cases, results) if isinstance(r, Exception)}
    name = "integrity_zoo" + (f"_{args.label}" if args.label else "")
    note = ""
    previous = Path(args.out) / f"{name}.json"
    if args.update and previous.exists():
        old = json.loads(previous.read_text())
        ran = {c.name for c in cases}
        rows += [r for r in old["pairs"] if r["pair"] not in ran]
        note = (f" Updated: {', '.join(sorted(ran))} rerun after a fix to the pair "
                f"({wall:.0f} s); the other rows from the run of {old['wall_s']:.0f} s.")
        wall, load = old["wall_s"], old["load_at_start"]
        cases = [c for c in load_cases() if c.name in {r["pair"] for r in rows} | set(errors)]
    result, lines = table(rows, errors)
    result.update(wall_s=round(wall, 1), workers=args.workers, load_at_start=round(load, 2),
                  load_at_end=round(os.getloadavg()[0], 2))
    head = [f"# Integrity zoo{': ' + args.label if args.label else ''}", "",
            f"`python benchmarks/integrity_zoo.py --workers {args.workers}"
            f"{''.join(' --only ' + s for s in args.only)}{' --label ' + args.label if args.label else ''}"
            f"{' --update' if args.update else ''}`: "
            f"{len(cases)} bug/healthy-twin pairs (tests/integrity_zoo/), each side a real sweep and report through "
            f"the CLI; {wall:.0f} s wall with {args.workers} workers on a shared 2-core machine "
            f"(load average {load:.1f} at the start, {result['load_at_end']:.1f} at the end).{note}", "",
            "Caught by cause: a check of the pair's class is named on the expected variant's verdict or findings "
            "(any arm where the bug touches every arm). By another check: only other checks named, or the "
            "verdict changed. False alarm: the healthy twin got a verdict other than better / worse / inconclusive "
            "/ insufficient, or a finding (not silenced) of the bug's class.", ""]
    write_results(args.out, name, result, head + lines)
    print("\n".join(head + lines))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
