"""The sweep's health preflight as the first sweep meets it: in its own process at a slot's settings, shown while
it runs (piped output and a real terminal), kept for resume and extend; the live view's clock in a pty.

    python -m pytest -q -n 0 tests/test_sweep_preflight.py
"""
from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

import pytest

from sweeper.execute import preflight_cache
from tests.helpers.local_pool import child_env, run, user_project

TASK = """
import sweeper
run = sweeper.init()
run.log(1, loss=1.0)
run.finish(val_loss=1.0 + run.config.lr + 0.01 * run.seed)
"""

# The hook records where it ran (one JSON line per call, in the task's folder) and takes `pause` seconds.
HOOKS = """
import json, os, sys, time
from sweeper.health import CheckResult, HealthReport


def preflight(config):
    with open("preflight_calls.jsonl", "a") as f:
        f.write(json.dumps({"argv0": sys.argv[0], "pid": os.getpid(), "omp": os.environ.get("OMP_NUM_THREADS"),
                            "wait": os.environ.get("OMP_WAIT_POLICY"), "cores": sorted(os.sched_getaffinity(0)),
                            "seed": config["seed"]}) + "\\n")
    time.sleep(config["pause"])
    verdict = config.get("verdict", "pass")
    return HealthReport([CheckResult("init_loss", verdict, value=4.6, expected="about 4.6", message=verdict)])
"""


def project(tmp_path, pause: float = 0.0, verdict: str = "pass"):
    root = user_project(tmp_path / "project", TASK, {"base": [], "high": ["lr=0.5"]},
                        f"lr: 0.1\npause: {pause}\nverdict: {verdict}")
    exp = root / "conf" / "experiment" / "mine.yaml"
    exp.write_text(exp.read_text().replace("  command: [python, task.py]\n",
                                           "  command: [python, task.py]\n  preflight: hooks:preflight\n"))
    (root / "hooks.py").write_text(HOOKS)
    return root


def calls(root) -> list[dict]:
    path = root / "preflight_calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.slow
def test_the_preflight_runs_at_a_slots_settings_and_resume_or_extend_never_repeat_it(tmp_path):
    root = project(tmp_path)
    d = tmp_path / "sweep"
    args = ["--config-dir", "conf", "+experiment=mine", f"sweeper.dir={d}", "sweeper.report=false",
            "launcher.max_parallel=2", "launcher.threads_per_run=1"]
    first = run([*args, "seeds=0"], cwd=root)
    assert first.returncode == 0, first.stdout + first.stderr
    call, = calls(root)
    assert call["argv0"].endswith("preflight_child.py") and call["pid"] != os.getpid()   # not in the sweeper
    assert call["omp"] == "1" and call["wait"] == "PASSIVE" and len(call["cores"]) == 1     # a slot's settings
    running = next(line for line in first.stdout.splitlines() if "preflight base: running" in line)
    assert f"cores {call['cores'][0]}, 1 thread(s), OMP_WAIT_POLICY=PASSIVE" in running
    assert "preflight base: PASS" in first.stdout
    assert {p.name for p in (d / "preflight").iterdir()} == {"base.json", "base.cache.json", "base.log"}

    more = run([*args, "seeds=0-1", "sweeper.extend=true"], cwd=root)          # extend: same config, more seeds
    assert more.returncode == 0, more.stdout + more.stderr
    assert len(calls(root)) == 1, calls(root)
    assert "preflight base: PASS (kept from " in more.stdout and "preflight base: running" not in more.stdout

    (root / "hooks.py").write_text(HOOKS + "\n# edited\n")                     # its code changed: it runs again
    again = run([*args, "seeds=0-2", "sweeper.extend=true"], cwd=root)
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(calls(root)) == 2 and "preflight base: running" in again.stdout


def test_a_kept_verdict_needs_the_same_inputs_and_unchanged_files(tmp_path):
    dep = tmp_path / "model.py"
    dep.write_text("x = 1\n")
    inputs = preflight_cache.preflight_inputs("m:f", {"lr": 0.1, "seed": 0}, {"OMP_NUM_THREADS": "1"})
    preflight_cache.store(tmp_path, "base", inputs, [str(dep)], ("pass", "", ""), 1.5)
    assert preflight_cache.cached(tmp_path, "base", inputs)["verdict"] == "pass"
    for other in ({"lr": 0.2, "seed": 0}, {"lr": 0.1, "seed": 1}):
        assert preflight_cache.cached(tmp_path, "base", preflight_cache.preflight_inputs(
            "m:f", other, {"OMP_NUM_THREADS": "1"})) is None
    assert preflight_cache.cached(tmp_path, "base", preflight_cache.preflight_inputs(
        "m:f", {"lr": 0.1, "seed": 0}, {"OMP_NUM_THREADS": "2"})) is None
    dep.write_text("x = 2  # edited\n")
    assert preflight_cache.cached(tmp_path, "base", inputs) is None
    assert preflight_cache.cached(tmp_path, "other", inputs) is None


HEAD = re.compile(r"sweep: (?:preflight base (\d+)s \| )?\d+ queued \| \d+ running \| (\d+) done \| .*?(\d+)s elapsed")


def in_pty(argv: list[str], cwd, env: dict, timeout: float) -> tuple[int, str, list[tuple[float, str]]]:
    """Run argv with a pseudo-terminal as stdout/stderr: (exit status, everything it wrote, (time, chunk) reads)."""
    master, slave = pty.openpty()
    # a terminal 160 columns wide: the view fits its lines to the width (an unsized pty reads as 80 columns,
    # or as whatever COLUMNS the test process inherited), and the head line must fit whole here
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    chunks, deadline = [], time.time() + timeout
    while time.time() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:          # the child closed the terminal
                break
            if not data:
                break
            chunks.append((time.time(), data.decode(errors="replace")))
        elif proc.poll() is not None:
            break
    os.close(master)
    code = proc.wait(timeout=30)
    return code, "".join(c for _, c in chunks), chunks


@pytest.mark.slow
def test_the_live_view_in_a_terminal_moves_its_clock_and_counters(tmp_path):
    """In a real terminal (a pty) the head line is redrawn about once a second while the preflight blocks the
    sweep's own thread (its phase shows with its age), and its counters follow the runs to the end."""
    root = project(tmp_path, pause=4.0)
    env = {k: v for k, v in child_env().items() if k != "SWEEPER_PROGRESS"}      # a terminal: the live view
    code, out, _ = in_pty([sys.executable, "-m", "sweeper", "--config-dir", "conf", "+experiment=mine", "seeds=0-1",
                           f"sweeper.dir={tmp_path / 'sweep'}", "sweeper.report=false"], root, env, 240)
    assert code == 0, out[-3000:]
    heads = [(int(m.group(1)) if m.group(1) else None, int(m.group(2)), int(m.group(3))) for m in HEAD.finditer(out)]
    assert "\x1b[" in out and heads, out[-2000:]                              # the live view, not plain lines
    during = [h for h in heads if h[0] is not None]
    assert len({age for age, _, _ in during}) >= 3, (during, out[-3000:])     # redrawn while the hook sleeps 4 s
    assert max(age for age, _, _ in during) >= 3
    elapsed = [e for _, _, e in heads]
    assert elapsed == sorted(elapsed) and elapsed[-1] >= 4, elapsed           # the clock only moves forward
    done = [n for _, n, _ in heads]
    assert done == sorted(done) and done[-1] == 4, done                       # 2 variants x 2 seeds, all counted


def _order(out: str) -> tuple[int, list[tuple[int, str]]]:
    """(the line index of the baseline's preflight verdict, [(line index, start line)])."""
    lines = out.splitlines()
    verdict = next(i for i, line in enumerate(lines) if "preflight base: PASS" in line or "base: FAIL" in line)
    return verdict, [(i, line) for i, line in enumerate(lines) if "] start  " in line]


@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores: one for the preflight, one for a seed")
def test_the_baselines_seeds_start_beside_its_preflight_and_the_variants_wait_for_it(tmp_path):
    """Seeds wait on the preflight only where they must: the baseline's first seed starts on the other slot while
    the baseline's preflight runs; no variant's seed, and nothing on the preflight's own slot, before its PASS."""
    root = project(tmp_path, pause=3.0)
    proc = run(["--config-dir", "conf", "+experiment=mine", "seeds=0-1", f"sweeper.dir={tmp_path / 'sweep'}",
                "sweeper.report=false", "launcher.max_parallel=2", "launcher.threads_per_run=1"], cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    verdict, starts = _order(proc.stdout)
    before = [line for i, line in starts if i < verdict]
    core = calls(root)[0]["cores"][0]
    assert any("start  base/seed_0" in line for line in before), proc.stdout          # beside the preflight
    assert not any("high/" in line or f"(cores {core}," in line for line in before), proc.stdout
    assert sum("high/" in line for _, line in starts) == 2 and len(starts) == 4, proc.stdout


@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores: one for the preflight, one for a seed")
def test_a_failing_baseline_preflight_still_starts_no_variant(tmp_path):
    """The baseline fails its preflight while its own seed may run beside it: the sweep ends with the refusal
    (exit 1), no seed of another variant started, theirs left pending for the next launch."""
    root = project(tmp_path, pause=2.0, verdict="fail")
    d = tmp_path / "sweep"
    proc = run(["--config-dir", "conf", "+experiment=mine", "seeds=0-1", f"sweeper.dir={d}",
                "sweeper.report=false", "launcher.max_parallel=2", "launcher.threads_per_run=1"], cwd=root)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the baseline base failed its health preflight" in proc.stderr, proc.stderr
    assert "start  high/" not in proc.stdout, proc.stdout
    statuses = {p.parent.name: json.loads(p.read_text())["status"] for p in (d / "runs" / "high").glob("*/status.json")}
    assert statuses == {"seed_0": "pending", "seed_1": "pending"}, statuses
    # the baseline's seeds that ran beside the failing preflight are discarded: the fixed baseline reruns them
    ran = [k for k in ("seed_0", "seed_1") if f"start  base/{k}" in proc.stdout]
    assert ran and "discarded" in proc.stdout, proc.stdout
    for k in ("seed_0", "seed_1"):
        run_dir = d / "runs" / "base" / k
        assert json.loads((run_dir / "status.json").read_text())["status"] == "pending"
        assert not (run_dir / "summary.json").exists()
    assert any((d / "runs" / "base" / k / "summary.rejected.json").exists() for k in ran)
