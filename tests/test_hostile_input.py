"""Hostile input (issue 48), each through the real CLI: a value with shell syntax substituted into a `bash -c`
template is passed on as data, never run; every command the product prints for the user to paste is
shell-quoted; a YAML alias bomb is one line naming the file; a run's folder replaced by a link out of the sweep
dir is never written through.

    python -m pytest -q tests/test_hostile_input.py
"""
from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.commands import ROOT
from tests.helpers.glue import glue_project, sweep
from tests.helpers.synthetic_sweep import write_sweep

EVIL = "sw $(touch PWNED) x; touch PWNED2 'q"


def python(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SWEEPER_RUN_DIR"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["SWEEPER_PROGRESS"] = "plain"
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def pasted_commands(text: str) -> list[str]:
    return re.findall(r"`(python -m sweeper[^`]*)`", text)


def assert_pastes_safely(command: str, word: str, cwd: Path) -> None:
    """The printed command, pasted into bash (its program swapped for printf), gives `word` back as one argument
    and runs nothing."""
    head = " ".join(command.split(" ")[:3])
    shlex_words = shlex.split(command)
    assert word in shlex_words, (command, shlex_words)
    proc = subprocess.run(["bash", "-c", command.replace(head, "printf '<%s>\\n'", 1)], cwd=cwd,
                          capture_output=True, text=True)
    assert f"<{word}>" in proc.stdout.splitlines(), (command, proc.stdout)
    assert not (cwd / "PWNED").exists() and not (cwd / "PWNED2").exists()


@pytest.mark.slow
def test_a_printed_resume_command_is_shell_quoted(tmp_path):
    """The report of a sweep with no finished run prints how to resume it; pasted, it runs nothing."""
    sweep_dir = tmp_path / EVIL
    write_sweep(sweep_dir, {"rope": [3.1, 3.2], "nope": [3.5, 3.4]}, baseline="rope",
                status={(v, s): "interrupted" for v in ("rope", "nope") for s in (0, 1)})
    proc = python("sweeper.report", str(sweep_dir), "--no-plots", cwd=tmp_path)
    commands = pasted_commands(proc.stdout + proc.stderr)
    assert any("sweeper.resume" in c for c in commands), proc.stdout + proc.stderr
    for command in commands:
        assert_pastes_safely(command, str(sweep_dir), tmp_path)


@pytest.mark.slow
def test_the_ctrl_c_line_quotes_the_sweep_dir(tmp_path):
    project = glue_project(tmp_path, "import time\ntime.sleep(60)\n")
    env = {k: v for k, v in os.environ.items() if k != "SWEEPER_RUN_DIR"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["SWEEPER_PROGRESS"] = "plain"
    sweep_dir = project / EVIL
    proc = subprocess.Popen([sys.executable, "-m", "sweeper", "--config-dir", "conf", "+experiment=glue", "seeds=0",
                             f"sweeper.dir=\"{sweep_dir}\"", "launcher.threads_per_run=1"], cwd=project, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(sweep_dir.glob("runs/a/seed_0/stdout.log")) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    commands = [c for c in pasted_commands(out + err) if "sweeper.resume" in c]
    assert commands, out[-2000:] + err[-2000:]
    for command in commands:
        assert_pastes_safely(command, str(sweep_dir), project)


SHELL_JOB = """\
import argparse, json, os
p = argparse.ArgumentParser()
p.add_argument('--out'); p.add_argument('--seed', type=int); p.add_argument('--label', nargs='*')
a = p.parse_args()
print(json.dumps({'val_loss': 0.5 + a.seed, 'label': a.label}))
"""
SHELL_EXPERIMENT = """# @package _global_
defaults:
  - override /task: custom
task:
  command: [bash, -c, "python job.py --out {out_dir} --seed={seed} --label {label} \\"{label}\\" '{label}'"]
label: "x; touch PWNED; echo $(touch PWNED2) 'q\\" `touch PWNED3`"
experiment:
  name: shell
  baseline: a
  metric: val_loss
  lower_is_better: true
  variants:
    a: []
"""


@pytest.mark.slow
def test_a_value_in_a_shell_template_is_data_not_code(tmp_path):
    project = tmp_path / "proj dir"
    (project / "conf" / "experiment").mkdir(parents=True)
    (project / "conf" / "experiment" / "shell.yaml").write_text(SHELL_EXPERIMENT)
    (project / "job.py").write_text(SHELL_JOB)
    proc = python("sweeper", "--config-dir", "conf", "+experiment=shell", "seeds=0", "sweeper.dir=sweep",
                  "launcher.threads_per_run=1", "sweeper.report=false", cwd=project)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not any((project / name).exists() for name in ("PWNED", "PWNED2", "PWNED3"))
    log = (project / "sweep" / "runs" / "a" / "seed_0" / "stdout.log").read_text()
    value = "x; touch PWNED; echo $(touch PWNED2) 'q\" `touch PWNED3`"
    line = next(json.loads(ln) for ln in log.splitlines() if ln.startswith("{"))
    assert line["label"] == [value, value, value], line


@pytest.mark.slow
def test_a_yaml_alias_bomb_is_one_line_naming_the_file(tmp_path):
    lines = ["# @package _global_", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    lines += ["experiment:", "  name: bomb", "  baseline: a", "  metric: val_loss", "  variants:", "    a: []"]
    bomb = tmp_path / "conf" / "experiment" / "bomb.yaml"
    bomb.parent.mkdir(parents=True)
    bomb.write_text("\n".join(lines) + "\n")
    t0 = time.process_time()
    proc = python("sweeper", "--config-dir", "conf", "+experiment=bomb", "sweeper.dry_run=true", cwd=tmp_path,
                  timeout=60)
    assert time.process_time() - t0 < 5
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1 and str(bomb) in proc.stderr and "alias" in proc.stderr, proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["conf"]


@pytest.mark.slow
def test_a_run_folder_replaced_by_a_link_out_of_the_sweep_dir_is_never_written_through(tmp_path):
    """After a sweep whose seed 1 failed, its out/ (then its whole run dir) is replaced by a link to a folder
    outside the sweep dir: the rerun stops with one line naming the link, and the folder outside is untouched."""
    project = glue_project(tmp_path, "if args.seed == 1:\n    sys.exit(1)\nprint(json.dumps({'val_loss': 0.5}))\n")
    first = sweep(project, "seeds=0-1", "sweeper.report=false")
    assert first.returncode == 1, first.stdout[-2000:] + first.stderr[-2000:]
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    run_dir = project / "sweep" / "runs" / "a" / "seed_1"
    for link in (run_dir / "out", run_dir):
        moved = link.with_name(link.name + ".moved")
        link.rename(moved)
        link.symlink_to(outside, target_is_directory=True)
        proc = sweep(project, "seeds=0-1", "sweeper.report=false")
        assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert proc.stderr.count("\n") == 1 and f"{link} is a symbolic link" in proc.stderr, proc.stderr
        assert sorted(os.listdir(outside)) == ["keep.txt"], os.listdir(outside)
        link.unlink()
        moved.rename(link)
