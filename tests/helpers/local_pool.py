"""Helpers for the local-pool tests: tiny sweeps as real subprocesses, waiting on files, the process table.

Also a pytest plugin for its sweep_dir fixture (`pytest_plugins = ["tests.helpers.local_pool"]` in a test module),
loaded
after the module imported it; PYTEST_DONT_REWRITE says it has no asserts to rewrite (no "already imported" warning).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.rundir import RunDir
from tests.helpers.commands import ROOT, TINY

GRANDCHILDREN = ROOT / "tests" / "grandchildren"


def sweep_args(
    sweep_dir: Path, *extra: str, steps: int = 20, seeds: str = "0", variants: str = "rope,nope"
) -> list[str]:
    """A tiny sweep of the rope experiment restricted to `variants`, without the report."""
    drop = [f"~experiment.variants.{v}" for v in ("rope", "nope", "rope_frozen_qk") if v not in variants.split(",")]
    tiny = [o for o in TINY if not o.startswith("train.steps=")]
    return [
        "+experiment=rope",
        *drop,
        f"seeds={seeds}",
        *tiny,
        f"train.steps={steps}",
        f"sweeper.dir={sweep_dir}",
        "sweeper.report=false",
        *extra,
    ]


def child_env(extra: dict | None = None, grandchildren: bool = False) -> dict:
    env = {**os.environ, "SWEEPER_PROGRESS": "plain", **(extra or {})}
    paths = [str(GRANDCHILDREN)] if grandchildren else []
    env["PYTHONPATH"] = os.pathsep.join(paths + [str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    if grandchildren:
        env["SWEEPER_TEST_GRANDCHILDREN"] = "1"
    else:
        env.pop("SWEEPER_TEST_GRANDCHILDREN", None)
    return env


def start(args: list[str], out: Path, env: dict | None = None, module: str = "sweeper") -> subprocess.Popen:
    """`python -m module args` in its own session (so the test can signal it alone), output to `out`."""
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=env or child_env(),
        stdout=open(out, "wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def run(
    args: list[str], env: dict | None = None, module: str = "sweeper", timeout: float = 240, cwd: Path | None = None
):
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd or ROOT,
        env=env or child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def user_project(root: Path, script: str, variants: dict[str, list[str]], config: str = "") -> Path:
    """A user's project outside our packages: conf/experiment/mine.yaml (task.command: [python, task.py]) and
    task.py. Sweep it with `run(["--config-dir", "conf", "+experiment=mine", ...], cwd=root)`."""
    (root / "conf" / "experiment").mkdir(parents=True, exist_ok=True)
    lines = [
        "# @package _global_",
        "defaults:",
        "  - override /task: custom",
        "task:",
        "  command: [python, task.py]",
        config,
        "experiment:",
        "  name: mine",
        f"  baseline: {next(iter(variants))}",
        "  metric: val_loss",
        "  lower_is_better: true",
        "  variants:",
    ]
    lines += [f"    {name}: [{', '.join(overrides)}]" for name, overrides in variants.items()]
    (root / "conf" / "experiment" / "mine.yaml").write_text("\n".join(lines) + "\n")
    (root / "task.py").write_text(script)
    return root


def wait_for(cond, timeout: float, what: str, proc: subprocess.Popen | None = None, log: Path | None = None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = cond()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(
                f"process exited ({proc.returncode}) while waiting for {what}:\n" + (log.read_text() if log else "")
            )
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}" + (f":\n{log.read_text()}" if log else ""))


def processes_mentioning(text: str) -> list[tuple[int, str]]:
    """Live (non-zombie) processes whose command line contains `text`, except this one."""
    found = []
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        if pid == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmd and state != "Z":
            found.append((pid, cmd))
    return found


def kill_all_mentioning(text: str) -> None:
    """Test cleanup only: never leave a process behind, even when an assertion failed."""
    for pid, _ in processes_mentioning(text):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.fixture
def sweep_dir(tmp_path):
    """A sweep dir under tmp_path; every process still mentioning it is killed afterwards.
    A test module gets it with `pytest_plugins = ["tests.helpers.local_pool"]`."""
    d = tmp_path / "sweep"
    yield d
    kill_all_mentioning(str(d))


def status(sweep_dir: Path, variant: str, seed: int = 0) -> dict:
    """The run's recorded status as a dict ({} when it has none or it cannot be read)."""
    rd = RunDir(run_dir(sweep_dir, variant, seed))
    try:
        return rd.read_status().to_dict() if rd.status_path.exists() else {}
    except UnreadableFile:
        return {}


def run_dir(sweep_dir: Path, variant: str, seed: int = 0) -> Path:
    return sweep_dir / "runs" / variant / f"seed_{seed}"


def checkpoints(rd: Path) -> list[int]:
    ck = rd / "ckpt"
    return sorted(int(p.name[5:13]) for p in ck.glob("step_*.pt")) if ck.is_dir() else []


def starts(rd: Path) -> int:
    """How many times the pool started this run (one header line per attempt in stdout.log)."""
    try:
        return (rd / "stdout.log").read_text(errors="replace").count("=== sweeper: start on")
    except OSError:
        return 0
