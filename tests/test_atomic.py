"""Atomic writes give files the mode open() would (0666 minus the umask), not mkstemp's 0600."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from sweeper.run.files.atomic import atomic_write_json, atomic_write_text

ROOT = Path(__file__).resolve().parent.parent


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_new_files_are_readable_by_the_group_and_others_under_umask_022(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "report.md", "# report\n")
        atomic_write_json(tmp_path / "x.json", {"a": 1})
    finally:
        os.umask(old)
    assert _mode(tmp_path / "report.md") == 0o644
    assert _mode(tmp_path / "x.json") == 0o644


def test_the_umask_is_honoured_and_a_replaced_file_keeps_its_mode(tmp_path):
    code = ("import os, sys; os.umask(0o027); from sweeper.run.files.atomic import atomic_write_text as w; "
            "w(sys.argv[1], 'a'); w(sys.argv[2], 'b')")
    existing = tmp_path / "kept.txt"
    existing.write_text("old")
    existing.chmod(0o600)
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "new.txt"), str(existing)], check=True, cwd=ROOT)
    assert _mode(tmp_path / "new.txt") == 0o640
    assert _mode(existing) == 0o600 and existing.read_text() == "b"


def test_the_report_files_of_a_sweep_are_world_readable(tmp_path):
    from sweeper.config.decision import DecisionOptions
    from sweeper.report.write import report_sweep
    from tests.helpers.synthetic_sweep import write_sweep

    old = os.umask(0o022)
    try:
        sweep = write_sweep(tmp_path / "sweep", {"base": [1.0, 1.1, 0.9], "new": [0.8, 0.85, 0.9]}, baseline="base")
        report_sweep(sweep, DecisionOptions(), plots=False)
    finally:
        os.umask(old)
    for name in ("report.md", "summary.csv"):
        assert _mode(Path(sweep) / name) == 0o644, name
