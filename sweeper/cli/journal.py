"""`python -m sweeper.journal list|search|show|conclude`: read and annotate the experiment journal.

    python -m sweeper.journal list [--experiment rope] [--variant nope] [--since 2026-12-01] [--until ...]
    python -m sweeper.journal search 'frozen qk'           # any text of an entry, case-insensitive
    python -m sweeper.journal show rope-815fcfd0           # an entry by sweep name, id or sweep dir
    python -m sweeper.journal conclude rope-815fcfd0 'RoPE helps; the frozen-qk kernel is broken'
    python -m sweeper.journal --journal ~/notes/journal list   # another journal dir (default: ./sweeps)

The journal's files and their owner: sweeper.report.journal.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from sweeper.cli.boundary import ArgumentParser, run_command
from sweeper.docstrings import docstring
from sweeper.errors import UsageError
from sweeper.report.journal import PAGE, RECORD, conclude, find, read_entries, select, summary_line


def _parser() -> ArgumentParser:
    p = ArgumentParser(prog="python -m sweeper.journal", description=docstring(sys.modules[__name__]).split("\n\n")[0])
    p.add_argument("--journal", metavar="DIR", default="sweeps",
                   help="the journal's folder (default: sweeps, where sweeps are written by default)")
    sub = p.add_subparsers(dest="command", required=True)
    ls = sub.add_parser("list", help="entries, newest last, optionally filtered")
    ls.add_argument("--experiment"), ls.add_argument("--variant")
    ls.add_argument("--since", metavar="YYYY-MM-DD"), ls.add_argument("--until", metavar="YYYY-MM-DD")
    sub.add_parser("search", help="entries whose text contains TEXT").add_argument("text")
    sub.add_parser("show", help="one entry as JSON").add_argument("ref", help="sweep name, entry id or sweep dir")
    c = sub.add_parser("conclude", help="set the human conclusion of an entry")
    c.add_argument("ref", help="sweep name, entry id or sweep dir")
    c.add_argument("text")
    return p


def _check_date(name: str, value: str | None) -> None:
    if value is not None:
        try:
            time.strptime(value[:10], "%Y-%m-%d")
        except ValueError:
            raise UsageError(f"--{name} {value!r}: expected a date YYYY-MM-DD, e.g. 2026-12-01") from None


def main(argv: list[str] | None = None) -> int:
    return run_command("sweeper.journal", _main, argv)


def _main(argv: list[str], state: dict) -> int:
    args = _parser().parse_args(argv)
    if args.command == "list":                        # bad input first, whether or not a journal is there
        _check_date("since", args.since), _check_date("until", args.until)
    folder = Path(os.path.expanduser(args.journal))
    if not (folder / RECORD).is_file() and args.command != "conclude":
        print(f"no journal in {folder} yet (a sweep's report writes one; --journal DIR names another)")
        return 0
    entries = read_entries(folder)
    if args.command == "list":
        for e in select(entries, args.experiment, args.variant, args.since, args.until):
            print(summary_line(e))
    elif args.command == "search":
        for e in select(entries, text=args.text):
            print(summary_line(e))
    elif args.command == "show":
        print(json.dumps(find(entries, args.ref), indent=2, default=str))
    else:
        if not (folder / RECORD).is_file():
            raise UsageError(f"no journal in {folder}: pass --journal DIR (the folder holding {RECORD})")
        e = conclude(folder, args.ref, args.text)
        print(f"{e['sweep']}: conclusion recorded in {folder / PAGE}")
    return 0
