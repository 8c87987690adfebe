"""Messages for the command the user ran (issue 46), through `python -m sweeper` in a user's git project: the
sweep dir shown as the README shows it (sweeps/NAME-HASH) and a note to ignore sweeps/; a pairing suggestion
when the arms' finals move together by seed (the seed fixes the data order, as a Trainer's does); seeds=0-1 on
a sweep dir that holds seeds 0-3 says the report covers all four; an inline variant works unquoted, and a
malformed one shows the quoting.

    python -m pytest -q -n 0 tests/test_user_messages.py
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.commands import ROOT

pytestmark = pytest.mark.slow
SCRIPT = """import json, random, sys
args = dict(a.lstrip("-").split("=", 1) for a in sys.argv[1:])
noise = random.Random(int(args["seed"])).random()          # the seed fixes what both arms share
print(json.dumps({"val_loss": 1.0 + noise + float(args["shift"])}))
"""
EXPERIMENT = """# @package _global_
defaults:
  - override /task: custom
task:
  command: [python, job.py]
  args: flags
shift: 0.0
experiment:
  name: pair
  baseline: a
  metric: val_loss
  lower_is_better: true
  variants:
    a: []
    b: [shift=0.01]
"""


def sweeper(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SWEEPER_PROGRESS": "plain"}
    return subprocess.run([sys.executable, "-m", "sweeper", "--config-dir", "conf", "+experiment=pair",
                           "launcher.threads_per_run=1", *args], cwd=project, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture
def project(tmp_path) -> Path:
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "pair.yaml").write_text(EXPERIMENT)
    (tmp_path / "job.py").write_text(SCRIPT)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    return tmp_path


def test_a_sweep_in_a_git_project_says_where_it_wrote_what_it_reports_and_how_to_pair(project):
    first = sweeper(project, "seeds=0-3")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    out = first.stdout
    shown, = [ln for ln in out.splitlines() if ln.startswith("sweep dir: ")]
    assert shown.startswith("sweep dir: sweeps/pair-") and (project / shown.split(": ")[1]).is_dir()
    assert "add `sweeps/` to .gitignore" in out
    assert "note: suggestion: experiment.design=paired (b vs a): their finals move together by seed" in out
    narrower = sweeper(project, "seeds=0-1")
    assert narrower.returncode == 0, narrower.stderr
    assert (f"note: seeds=0-1: {shown.split('/')[-1]} already holds seeds 0-3 of this experiment; the report "
            f"covers all 4 seeds it holds") in narrower.stdout
    (project / ".gitignore").write_text("sweeps/\n")
    paired = sweeper(project, "seeds=0-3", "+experiment.design=paired")
    assert paired.returncode == 0, paired.stderr
    assert ".gitignore" not in paired.stdout and "suggestion" not in paired.stdout


def test_an_inline_variant_works_unquoted_and_a_broken_one_shows_the_quoting(project):
    inline = sweeper(project, "seeds=0", "sweeper.dry_run=true", "+experiment.variants.c=[shift=0.02,+tag=[x,y]]")
    assert inline.returncode == 0, inline.stderr
    assert any(ln.split()[:3] == ["c", "shift=0.02", "+tag=[x,y]"] for ln in inline.stdout.splitlines()), inline.stdout
    broken = sweeper(project, "seeds=0", "sweeper.dry_run=true", "+experiment.variants.c=[shift=0.02")
    assert broken.returncode == 2 and not (project / "sweeps").exists()
    assert broken.stderr.strip() == ("sweeper: error: malformed override '+experiment.variants.c=[shift=0.02': a "
                                     "variant is a list of quoted overrides, e.g. '+experiment.variants.NAME=["
                                     "\"key=value\",\"other.key=value\"]' (the outer quotes for the shell)")
