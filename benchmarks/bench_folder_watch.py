"""What the run-isolation snapshot costs on a big project: sweeper.run.observed.folder_watch.snapshot (taken twice per
run, before and after) and changed() on a folder of 10,000 files, 10% of them in a hidden `.cache/`, with a
virtual environment and a .git folder beside them (skipped, as a real project has them).

    python benchmarks/bench_folder_watch.py                     # 10,000 files, median of 7
    python benchmarks/bench_folder_watch.py --files 10000 --repeats 7 --out benchmarks/results

The hidden share is also timed with hidden folders skipped (what the snapshot did before they were watched), in
the same run, alternating, so the ratio stands under load.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import sweeper.run.observed.folder_watch as folder_watch  # noqa: E402
from benchmarks._results import write_results  # noqa: E402


def make_project(root: Path, n: int) -> None:
    """n watched files: 90% in 100 source/data folders, 10% in .cache/; plus .git and .venv (skipped)."""
    hidden = n // 10
    for i in range(n - hidden):
        folder = root / "data" / f"d{i % 100:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.txt").write_bytes(b"x")
    for i in range(hidden):
        folder = root / ".cache" / f"c{i % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"c{i}.bin").write_bytes(b"x")
    for skipped in (".git/objects", ".venv/lib"):
        (root / skipped).mkdir(parents=True)
        for i in range(2000):
            (root / skipped / f"s{i}").write_bytes(b"x")
    (root / ".venv" / "pyvenv.cfg").write_text("")


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--files", type=int, default=10_000)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_project(root, args.files)
        before = folder_watch.snapshot(root)
        assert before is not None and len(before) == args.files, len(before or ())
        skip_hidden = folder_watch.SKIP_NAMES | {".cache"}
        watched, visible, diffs = [], [], []
        for _ in range(args.repeats):
            watched.append(timed(lambda: folder_watch.snapshot(root)))
            folder_watch.SKIP_NAMES, kept = skip_hidden, folder_watch.SKIP_NAMES
            visible.append(timed(lambda: folder_watch.snapshot(root)))
            folder_watch.SKIP_NAMES = kept
            after = folder_watch.snapshot(root)
            diffs.append(timed(lambda: folder_watch.changed(before, after)))
    w, v, d = (statistics.median(x) for x in (watched, visible, diffs))
    load = os.getloadavg()[0]
    result = {"files": args.files, "repeats": args.repeats, "snapshot_s": w, "snapshot_without_hidden_s": v,
              "ratio": w / v, "changed_s": d, "per_run_s": 2 * w + d, "load_1min": load}
    lines = ["# Run-isolation snapshot on a big project", "",
             f"- {args.files:,} files (10% in a hidden .cache/; .git and a .venv of 2,000 files each skipped): "
             f"snapshot {w * 1e3:.0f} ms (median of {args.repeats}), {v * 1e3:.0f} ms without the hidden folder "
             f"(ratio {w / v:.2f}); changed() {d * 1e3:.0f} ms; per run (two snapshots and the diff) "
             f"{(2 * w + d) * 1e3:.0f} ms",
             f"- load average (1 min) {load:.1f} on {os.cpu_count()} cores",
             "- `python benchmarks/bench_folder_watch.py --out benchmarks/results`"]
    print("\n".join(lines))
    if args.out:
        write_results(args.out, "bench_folder_watch", result, lines)


if __name__ == "__main__":
    main()
