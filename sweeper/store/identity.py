"""A run's identity: everything that decides its result, compared input by input, so a run is reused only when
every input is the same and a dry run can name the first one that differs. Torch-free.

    planned = planned_inputs(plan, run, env)     # what the plan would run (env: numbers_env() for this plan)
    stored = stored_inputs(summary, task, ranks)  # what an earlier run recorded (its summary, its sweep's task)
    first_difference(planned, stored, cwd, cache)  # None (the same run), or "torch 2.13.0+cpu -> 2.12.0"
    run_key(planned)                             # a short hash of the inputs known before the run (reused.json)

The inputs, in the order a difference is named (INPUTS):
  task         the code the task starts: task.entry or task.command and its args (sweeper.plan.make.task_identity)
  config       the resolved run config, seed included (its config hash)
  ranks        the processes of a data-parallel run
  code         every project source file the earlier run ran, hashed (sweeper.run.observed.provenance.code_files): the
               same files must hash the same now; a task.command's run also needs the project's source file list
               unchanged
  python, torch, numpy, cuda, cudnn, sweeper    library versions, as installed (sweeper's with a digest of its
               own source files: sweeper.run.observed.envinfo.own_code)
               (sweeper.run.observed.envinfo.numbers_env)
  device       the host's device models (GPU models, else the CPU model)
  determinism  CUBLAS_WORKSPACE_CONFIG, PYTHONHASHSEED, NVIDIA_TF32_OVERRIDE (the config's own flags are in config)
  threads      the thread count every run gets (the plan's launch settings)
An earlier run is a candidate only when it finished (or diverged: an outcome sweeps never rerun) and recorded its
environment and code; failed, interrupted or still running runs never are.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sweeper.run.files.hashing import stable_hash
from sweeper.run.observed.provenance import changed_files

ENV_INPUTS = ("python", "torch", "numpy", "cuda", "cudnn", "sweeper", "device", "determinism", "threads")
INPUTS = ("task", "config", "ranks", "code", *ENV_INPUTS)


@dataclass(frozen=True)
class Inputs:
    """One run's identity inputs; `code` is the {file: hash} an earlier run recorded (a planned run has none yet:
    its files are known when it has run) and `sources` a task.command project's source file list."""
    task: str
    config: str
    ranks: int
    env: dict
    code: dict | None = None
    sources: tuple[str, ...] | None = field(default=None)


def run_key(inputs: Inputs) -> str:
    """A short hash of the inputs known before a run runs (task, config, ranks, environment)."""
    return stable_hash({"task": inputs.task, "config": inputs.config, "ranks": inputs.ranks, "env": inputs.env}, 16)


def _shown(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "unset"
    return "unknown" if value is None else str(value)


def first_difference(planned: Inputs, stored: Inputs, cwd: str, cache: dict | None = None) -> str | None:
    """The first input (INPUTS order) in which the stored run differs from the planned one, said for a user
    ("code: model.py changed"); None when it is the same run. `cache` holds file hashes across calls."""
    if planned.task != stored.task:
        return "task: another command or entry point"
    if planned.config != stored.config:
        return "config: another run config"
    if planned.ranks != stored.ranks:
        return f"ranks: {stored.ranks} -> {planned.ranks} per run"
    if stored.code is None:
        return "code: the earlier run recorded no project files (an older sweeper)"
    edited = changed_files(stored.code, cwd, cache)
    if edited:
        return f"code: {', '.join(edited[:3])}{f' and {len(edited) - 3} more' if len(edited) > 3 else ''} changed"
    if planned.sources is not None and set(planned.sources) != set(stored.code):
        added = sorted(set(planned.sources) - set(stored.code))
        return f"code: the project's sources differ ({', '.join(added[:3]) or 'files removed'})"
    if not stored.env:
        return "environment: the earlier run recorded none (an older sweeper)"
    for name in ENV_INPUTS:
        if planned.env.get(name) != stored.env.get(name):
            return f"{name}: {_shown(stored.env.get(name))} -> {_shown(planned.env.get(name))}"
    return None
