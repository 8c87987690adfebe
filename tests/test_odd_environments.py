"""Odd environments (issue 48): `python -OO` (docstrings stripped), a project folder whose name is not UTF-8
under LC_ALL=C, a file-size limit on the sweeper itself, and bad paths for `sweeper.audit --dir`; each through
the real CLI.

    python -m pytest -q tests/test_odd_environments.py
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.commands import ROOT
from tests.helpers.glue import glue_project
from tests.helpers.synthetic_sweep import write_sweep


def python(*args: str, cwd: Path | None = None, env: dict | None = None, options: tuple = ()) -> \
        subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "SWEEPER_RUN_DIR"}
    full["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), full.get("PYTHONPATH")) if p)
    full.update(env or {})
    return subprocess.run([sys.executable, *options, "-m", *args], cwd=cwd or ROOT, env=full, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
def test_usage_text_survives_stripped_docstrings(tmp_path):
    """-OO: every command's --help still prints its usage, and no command needs a docstring to run."""
    for module, words in (("sweeper.report", "usage: python -m sweeper.report"),
                          ("sweeper.resume", "python -m sweeper.resume SWEEP_DIR"),
                          ("sweeper.journal", "usage: python -m sweeper.journal"),
                          ("sweeper.audit", "python -m sweeper.audit +experiment=NAME"),
                          ("sweeper.slurm", "python -m sweeper.slurm status|cancel")):
        proc = python(module, "--help", options=("-OO",), cwd=tmp_path)
        assert proc.returncode == 0 and words in proc.stdout, (module, proc.stdout[-500:], proc.stderr[-2000:])
    proc = python("sweeper", options=("-OO",), cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "no experiment given" in proc.stderr


@pytest.mark.slow
def test_a_report_under_stripped_docstrings_is_the_same_report(tmp_path):
    sweep = write_sweep(tmp_path / "s", {"rope": [3.1, 3.2, 3.0, 3.05], "nope": [3.5, 3.4, 3.6, 3.45]},
                        baseline="rope")
    proc = python("sweeper.report", str(sweep), "--no-plots", options=("-OO",), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "nope vs rope: WORSE" in proc.stdout, proc.stdout[-2000:]
    stripped = (sweep / "report.md").read_text()
    assert "1. Outcome" in stripped                         # the verdict rules, read from the source
    proc = python("sweeper.report", str(sweep), "--no-plots", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (sweep / "report.md").read_text().split("1. Outcome")[1] == stripped.split("1. Outcome")[1]


@pytest.mark.slow
def test_audit_dir_that_is_a_file_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "afile").write_text("x")
    for where in ("afile", "afile/sub"):
        proc = python("sweeper.audit", "+experiment=rope", "--dir", str(tmp_path / where), cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and "not a directory" in proc.stderr, proc.stderr
    assert (tmp_path / "afile").read_text() == "x" and sorted(os.listdir(tmp_path)) == ["afile"]


@pytest.mark.slow
@pytest.mark.parametrize("utf8_mode", [None, "0", "1"], ids=["default", "PYTHONUTF8=0", "PYTHONUTF8=1"])
def test_a_project_folder_that_is_not_utf8_under_lc_all_c(tmp_path, utf8_mode):
    """A folder name with bytes 0xff 0xfe (not UTF-8) under LC_ALL=C: the sweep and its report run, and the
    paths they print are the folder's own bytes (a pasted path names the folder that exists)."""
    project = glue_project(tmp_path, "print(json.dumps({'val_loss': 0.5 + args.seed}))\n")
    odd = os.fsencode(tmp_path) + b"/proj\xff\xfe"
    os.rename(os.fsencode(project), odd)
    env = {k: v for k, v in os.environ.items() if k not in ("SWEEPER_RUN_DIR", "LANG", "LC_CTYPE")}
    env.update(LC_ALL="C", SWEEPER_PROGRESS="plain", PYTHONPATH=str(ROOT))
    if utf8_mode is not None:
        env.update(PYTHONUTF8=utf8_mode, PYTHONCOERCECLOCALE="0")
    outputs = []
    for args in (["sweeper", "--config-dir", "conf", "+experiment=glue", "seeds=0-1", "sweeper.dir=sweep",
                  "launcher.threads_per_run=1"], ["sweeper.report", "sweep", "--no-plots"]):
        proc = subprocess.run([sys.executable, "-m", *args], cwd=odd, env=env, capture_output=True, timeout=300)
        assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
        assert b"internal error" not in proc.stderr
        outputs.append(proc.stdout)
    # the folder's own bytes come back: in the progress line (absolute) and the closing line (as the user gave it)
    assert b"sweep dir " + odd + b"/sweep: " in outputs[0], outputs[0][-2000:]
    assert b"sweep dir: sweep\n" in outputs[0], outputs[0][-2000:]
    assert b"journal: " + odd + b"/journal.md\n" in outputs[1], outputs[1][-2000:]


def _limited(args: list[str], cwd: Path, kib: int = 40) -> subprocess.CompletedProcess:
    """`python -m ARGS` under `ulimit -f KIB` (a file-size limit on the sweeper itself)."""
    env = {k: v for k, v in os.environ.items() if k != "SWEEPER_RUN_DIR"}
    env.update(PYTHONPATH=str(ROOT), SWEEPER_PROGRESS="plain")
    command = " ".join(shlex.quote(w) for w in [sys.executable, "-m", *args])
    return subprocess.run(["bash", "-c", f"ulimit -f {kib}; exec {command}"], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def _check_every_file_written_or_named(out_dir: Path, text: str) -> list[str]:
    named = re.findall(r"not written: writing (\S+): File too large", text)
    files = [out_dir / "report.md", out_dir / "report.html", out_dir / "summary.csv",
             *(out_dir / "plots" / f"{p}.png" for p in ("metric_curve", "final_metric", "paired_difference"))]
    for path in files:
        assert path.exists() != any(Path(n).name == path.name for n in named), (path, named, text[-2000:])
    return named


@pytest.mark.slow
def test_under_a_file_size_limit_every_file_not_written_is_named_and_the_status_says_so(tmp_path):
    sweep = write_sweep(tmp_path / "s", {"rope": [3.1, 3.2, 3.0, 3.05], "nope": [3.5, 3.4, 3.6, 3.45]},
                        baseline="rope")
    proc = _limited(["sweeper.report", str(sweep)], tmp_path)
    named = _check_every_file_written_or_named(sweep, proc.stdout + proc.stderr)
    assert named and proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"{len(named)} file(s) not written" in proc.stderr, proc.stderr
    assert "nope vs rope: WORSE" in proc.stdout                 # the decision table is complete
    project = glue_project(tmp_path / "p", "print(json.dumps({'val_loss': 0.5 + args.seed}))\n")
    proc = _limited(["sweeper", "--config-dir", "conf", "+experiment=glue", "seeds=0-2", "sweeper.dir=sweep",
                     "launcher.threads_per_run=1"], project)
    named = _check_every_file_written_or_named(project / "sweep", proc.stdout + proc.stderr)
    assert named and proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "file(s) of the report not written" in proc.stderr
