"""Where the benchmarks put their numbers: <name>.json (the result dict) and <name>.md, atomically, in one folder.

    from benchmarks._results import write_results
    write_results(args.out, "bench_checkpoint", result, ["# Checkpoint cost", "", "- share 0.3%"])
"""
from __future__ import annotations

from pathlib import Path

from sweeper.run.files.atomic import atomic_write_json, atomic_write_text


def write_results(out_dir: str | Path, name: str, result: dict, md_lines: list[str]) -> None:
    """Write out_dir/<name>.json and out_dir/<name>.md (the lines, one per line); out_dir is created."""
    out = Path(out_dir)
    atomic_write_json(out / f"{name}.json", result)
    atomic_write_text(out / f"{name}.md", "\n".join(md_lines) + "\n")
