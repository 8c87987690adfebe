"""`python -m sweeper.gc [FOLDER ...] [--delete]`: run dirs no sweep refers to, and the disk reuse uses.

    python -m sweeper.gc                    # lists them under ./sweeps (dry run: nothing removed)
    python -m sweeper.gc sweeps other/      # other folders of sweep dirs
    python -m sweeper.gc --delete           # removes what it lists (a sweep in use is skipped and named)

What is listed and why: sweeper.store.gc. A reused run is its new sweep's own copy (checkpoints hard-linked, the
rest copied), so deleting an earlier sweep whole never takes a file from a later one.
"""
from __future__ import annotations

from pathlib import Path

from sweeper.cli.boundary import ArgumentParser, run_command
from sweeper.errors import UsageError
from sweeper.store.gc import disk_use, remove, unreferenced


def _parser() -> ArgumentParser:
    p = ArgumentParser(prog="python -m sweeper.gc", description=__doc__.split("\n\n")[0])
    p.add_argument("folders", nargs="*", metavar="FOLDER", help="folders of sweep dirs (default: sweeps)")
    p.add_argument("--delete", action="store_true", help="remove what is listed (default: list only)")
    return p


def human(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def main(argv: list[str] | None = None) -> int:
    return run_command("sweeper.gc", _main, argv)


def _main(argv: list[str], state: dict) -> int:
    args = _parser().parse_args(argv)
    folders = [Path(f) for f in args.folders or ["sweeps"]]
    for folder in folders:
        if not folder.is_dir() or folder.is_symlink():
            raise UsageError(f"{folder}: not a folder of sweep dirs; name one (default: sweeps, where sweeps are "
                             f"written)")
    found = unreferenced(folders)
    use = disk_use(folders)
    print(f"disk: {human(use.total)} in {use.sweeps} sweep dir(s); reuse: {use.reused_runs} run(s) reused, "
          f"{human(use.copied)} copied, {human(use.linked)} hard-linked (shared, counted once)")
    for item in found:
        print(f"  {item.path}  {human(item.bytes)}  ({item.why})")
    freed = sum(item.bytes for item in found)
    if not found:
        print("nothing to remove: every run dir belongs to its sweep's plan")
        return 0
    if not args.delete:
        print(f"dry run: {len(found)} unreferenced, {human(freed)}; add --delete to remove them")
        return 0
    removed, skipped = remove(found)
    for why in skipped:
        print(f"skipped: {why}")
    print(f"removed {len(removed)} of {len(found)}, {human(sum(i.bytes for i in removed))}")
    return 0 if not skipped else 1
