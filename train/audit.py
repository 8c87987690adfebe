"""The resume audit: is a run that stopped and resumed bitwise the run that never stopped?

    report = audit_resume(run_cfg, "/tmp/audit")          # run_cfg: a run config mapping (config.yaml)
    print(report.format()); report.identical              # "result: bitwise identical" or the first divergence

Three real `python -m sweeper.train` processes: "straight" trains N steps; "resumed" trains k steps and stops (mode
"stop": the SIGTERM path, checkpoint at step k, exit 75; mode "kill": SIGKILL right after step k, so it resumes
from the last periodic checkpoint and replays the steps after it), then a fresh process resumes it to step N.
Every process appends per-step hashes of the batch, every RNG state, the data-order state, the LR schedule,
every parameter and every optimizer tensor (train/trail.py); the audit compares them step by step (replayed
steps included) plus the runs' metrics lines, and reports the first step and name that differ.

N defaults to train.steps; with N < train.steps both runs stop at N (same config, same LR schedule).
`drop_rng_state` (test-only) leaves one state out of the checkpoints, which the audit must then catch.
`experiment` / `variant` name the audited run in the report and in the audit runs' status (a run's identity
is not part of its config).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sweeper.run.files.atomic import atomic_write_json, open_log
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import EXIT_INTERRUPTED, Status
from sweeper.run.streams import DROP_ENV, DROPPABLE
from sweeper.train.config import RunConfig
from sweeper.train.trail import AUDIT_ENVS, KILL_ENV, STOP_ENV, TRAIL_ENV, read_trail

ROOT = Path(__file__).resolve().parent.parent
MODES = ("stop", "kill")


class AuditError(RuntimeError):
    """A training process of the audit failed (not a divergence): the message holds its log tail."""


@dataclass
class AuditReport:
    identical: bool
    steps: int
    stop_at: int
    mode: str
    work_dir: str
    label: str = ""
    resumed_from: str | None = None
    compared_steps: int = 0
    compared_names: int = 0
    compared_metrics: int = 0
    first_step: int | None = None
    first_name: str | None = None
    differing: list[str] = field(default_factory=list)     # every name that differs at first_step
    detail: str = ""

    def format(self) -> str:
        how = ("stopped after step {k} (the SIGTERM path: checkpoint, exit 75)" if self.mode == "stop"
               else "killed with SIGKILL right after step {k}").format(k=self.stop_at)
        lines = [f"resume audit{' ' + self.label if self.label else ''}: {self.steps} steps straight vs {how}, "
                 f"resumed from {self.resumed_from or 'nothing (no checkpoint yet: restarted from step 0)'}",
                 f"compared {self.compared_steps} steps x {self.compared_names} state hashes (batch, RNG states, "
                 f"data order, LR schedule, parameters, optimizer state) and {self.compared_metrics} metrics lines"]
        if self.identical:
            lines.append("result: bitwise identical")
        else:
            shown = ", ".join(self.differing[:6]) + (f", ... ({len(self.differing)} in all)"
                                                     if len(self.differing) > 6 else "")
            lines.append(f"result: DIVERGED at step {self.first_step}: first differing {self.first_name}"
                         f" (differing at that step: {shown})" + (f"; {self.detail}" if self.detail else ""))
        lines.append(f"audit dir: {self.work_dir}")
        return "\n".join(lines)


def default_stop_at(steps: int, ckpt_interval: int) -> int:
    """Half way, moved off a checkpoint step so a stop lands mid-interval (and a kill replays a step)."""
    k = max(1, steps // 2)
    if ckpt_interval and k % ckpt_interval == 0 and k + 1 < steps:
        k += 1
    return k


def audit_resume(run_cfg, work_dir: str | Path, *, steps: int | None = None, stop_at: int | None = None,
                 mode: str = "stop", threads: int | None = 1, drop_rng_state: str | None = None,
                 timeout_s: float = 3600.0, experiment: str | None = None, variant: str | None = None) -> AuditReport:
    cfg = run_cfg if isinstance(run_cfg, RunConfig) else RunConfig.from_dict(run_cfg)
    n = cfg.train.steps if steps is None else steps
    if not isinstance(n, int) or not 2 <= n <= cfg.train.steps:
        raise ValueError(f"audit steps={n!r}: accepted is 2 <= steps <= train.steps={cfg.train.steps}")
    k = default_stop_at(n, cfg.train.ckpt_interval) if stop_at is None else stop_at
    if not isinstance(k, int) or not 1 <= k < n:
        raise ValueError(f"audit stop_at={k!r}: accepted is 1 <= stop_at < steps={n}")
    if mode not in MODES:
        raise ValueError(f"audit mode={mode!r}: accepted values are {', '.join(MODES)}")
    if drop_rng_state is not None and drop_rng_state not in DROPPABLE:
        raise ValueError(f"drop_rng_state={drop_rng_state!r}: accepted values are {', '.join(DROPPABLE)}")
    work = Path(work_dir).resolve()
    straight, resumed = work / "straight", work / "resumed"
    for d in (straight, resumed):          # the audit owns these two folders: always start them fresh
        shutil.rmtree(d, ignore_errors=True)
        rd = RunDir(d)
        rd.write_config(cfg.to_dict())
        rd.update_status(Status.PENDING, run_id=f"audit-{d.name}", experiment=experiment, variant=variant,
                         seed=cfg.seed)
    base = child_env(threads, drop_rng_state)
    stop_n = {STOP_ENV: str(n)} if n < cfg.train.steps else {}
    first = {KILL_ENV: str(k)} if mode == "kill" else {STOP_ENV: str(k)}
    p_straight = _start(straight, {**base, **stop_n, TRAIL_ENV: str(straight / "trail.jsonl")})
    p_first = _start(resumed, {**base, **first, TRAIL_ENV: str(resumed / "trail.jsonl")})
    _wait(p_straight, straight, (75,) if stop_n else (0,), timeout_s)
    _wait(p_first, resumed, (-9,) if mode == "kill" else (EXIT_INTERRUPTED,), timeout_s)
    p_second = _start(resumed, {**base, **stop_n, TRAIL_ENV: str(resumed / "trail.jsonl")})
    _wait(p_second, resumed, (75,) if stop_n else (0,), timeout_s)

    summary = RunDir(resumed).read_summary()
    name = f"{experiment or 'adhoc'}/{variant or 'default'}, " if experiment or variant else ""
    report = AuditReport(identical=True, steps=n, stop_at=k, mode=mode, work_dir=str(work),
                         label=f"({name}seed {cfg.seed})",
                         resumed_from=summary.extra.get("resumed_from") if summary else None)
    compare_trails(read_trail(straight / "trail.jsonl"), read_trail(resumed / "trail.jsonl"), n, report)
    compare_metrics(straight, resumed, n, report)
    atomic_write_json(work / "audit.json", asdict(report))
    return report


def child_env(threads: int | None, drop_rng_state: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in AUDIT_ENVS + (DROP_ENV,)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    if threads is not None:                # both runs must use the same count (it changes CPU float sums)
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    if drop_rng_state:
        env[DROP_ENV] = drop_rng_state
    return env


def _start(run_dir: Path, env: dict) -> subprocess.Popen:
    with open_log(RunDir(run_dir).log_path) as log:
        return subprocess.Popen([sys.executable, "-m", "sweeper.train", str(run_dir)], cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def _wait(proc: subprocess.Popen, run_dir: Path, expected: tuple[int, ...], timeout_s: float) -> None:
    try:
        rc = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AuditError(f"audit run {run_dir} took longer than {timeout_s:.0f}s; killed it") from None
    if rc not in expected:
        tail = RunDir(run_dir).log_path.read_text(errors="replace").strip().splitlines()[-15:]
        raise AuditError(f"audit run {run_dir} exited with status {rc} (expected {' or '.join(map(str, expected))})"
                         ":\n    " + "\n    ".join(tail))


def compare_trails(straight: list[dict], resumed: list[dict], n: int, report: AuditReport) -> None:
    """Every resumed-trail line against the straight run's line for that step; fills the report."""
    ref = {r["step"]: r["hashes"] for r in straight}
    missing = [s for s in range(1, n + 1) if s not in ref]
    if missing:
        raise AuditError(f"the straight run's trail lacks steps {missing[:5]}: it did not train {n} steps")
    covered = {r["step"] for r in resumed}
    if set(range(1, n + 1)) - covered:
        gap = min(set(range(1, n + 1)) - covered)
        raise AuditError(f"the resumed run's trail lacks step {gap}: it did not train every step up to {n}")
    report.compared_steps, report.compared_names = n, len(ref[1])
    worst: tuple[int, list[str]] | None = None
    for line in resumed:
        want = ref.get(line["step"])
        if want is None:
            continue
        got = line["hashes"]
        diff = [name for name in want if got.get(name) != want[name]]
        diff += [name for name in got if name not in want]
        if diff and (worst is None or line["step"] < worst[0]):
            worst = (line["step"], diff)
    if worst:
        report.identical, report.first_step, report.differing = False, worst[0], worst[1]
        report.first_name = worst[1][0]


def _comparable(record: dict) -> dict:
    """A metrics line without its timing fields (throughput and wall times differ between any two runs)."""
    return {k: v for k, v in record.items() if not (k.endswith("_s") or "per_s" in k or "time" in k)}


def compare_metrics(straight: Path, resumed: Path, n: int, report: AuditReport) -> None:
    a = [_comparable(r) for r in RunDir(straight).read_metrics()[0] if r["step"] <= n]
    b = [_comparable(r) for r in RunDir(resumed).read_metrics()[0] if r["step"] <= n]
    report.compared_metrics = len(a)
    if not report.identical:           # the state trail already named the first divergence
        return
    if [r.get("step") for r in a] != [r.get("step") for r in b]:
        report.identical, report.first_name = False, "metrics/steps"
        report.detail = (f"the logged metrics steps differ: {[r.get('step') for r in a]} vs "
                         f"{[r.get('step') for r in b]}")
        report.first_step = next((x.get("step") for x, y in zip(a, b) if x.get("step") != y.get("step")), None)
        report.differing = [report.first_name]
        return
    for x, y in zip(a, b):
        keys = [key for key in sorted(set(x) | set(y)) if x.get(key) != y.get(key)]
        if keys:
            report.identical, report.first_step = False, x["step"]
            report.differing = [f"metrics/{key}" for key in keys]
            report.first_name = report.differing[0]
            report.detail = "; ".join(f"{key}: {x.get(key)!r} vs {y.get(key)!r}" for key in keys[:3])
            return
