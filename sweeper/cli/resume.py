"""`python -m sweeper.resume SWEEP_DIR [launcher.KEY=VALUE ...] [sweeper.report=false]`: finish a sweep.

    python -m sweeper.resume sweeps/rope-1a2b3c4d                          # same launcher settings as before
    python -m sweeper.resume sweeps/rope-1a2b3c4d launcher.max_parallel=1  # other launcher settings

The plan is read from the sweep dir alone (its manifest: experiment, seeds, task, launcher; and each run's frozen
config.yaml), not recomposed from the config dirs, so edits to the configs since the sweep started cannot change
it; nor can launcher overrides change the launch settings the plan recorded (the threads of every run) or the
ranks per run of each variant (its resources). Finished runs are skipped, diverged ones kept, interrupted ones resume
from their checkpoints, failed and
pending ones run again (with the retry policy and crash-loop stop of the launcher). A run whose config.yaml no
longer matches the hash recorded in the manifest is refused (exit 2): that would be a different plan. Exit
status as `python -m sweeper`.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import yaml

from sweeper.cli.boundary import run_command
from sweeper.config.launchers import backend_of
from sweeper.docstrings import docstring
from sweeper.errors import UsageError
from sweeper.execute.end import run_to_end
from sweeper.execute.launch import fix_launch
from sweeper.pasted import pasted
from sweeper.plan.from_manifest import plan_from_manifest
from sweeper.plan.make import Plan, recorded
from sweeper.run.files.manifest import MANIFEST

USAGE = "usage: python -m sweeper.resume SWEEP_DIR [launcher.KEY=VALUE ...] [sweeper.report=true|false]"


def load_plan(sweep_dir: Path, overrides: list[str]) -> tuple[Plan, list[str]]:
    """The recorded plan (and recorded argv) of a sweep dir, with launcher/report overrides applied."""
    sweep_dir = Path(os.path.expanduser(sweep_dir)).resolve()
    for item in overrides:                            # the command line first: bad input before any file is read
        key, eq, _ = item.partition("=")
        if not eq or not (key.startswith("launcher.") or key == "sweeper.report") or key == "launcher.name":
            raise UsageError(f"{item!r}: accepted arguments after SWEEP_DIR are launcher.KEY=VALUE and "
                             f"sweeper.report=true|false (the plan itself is fixed by {MANIFEST})")
    manifest = recorded(sweep_dir)
    if manifest is None and (sweep_dir / "runs").is_dir():
        raise UsageError(f"{sweep_dir}: no {MANIFEST} yet: the sweeper that planned it was stopped while it wrote the "
                         f"plan; run the command that started it again (it completes the plan, then the sweep)")
    if manifest is None:
        raise UsageError(f"{sweep_dir}: no readable {MANIFEST}; give the directory a sweep was started in "
                         f"(it holds {MANIFEST} and runs/)")
    if manifest.source != "sweeper":
        raise UsageError(f"{sweep_dir / MANIFEST} was written by {manifest.source} (source={manifest.source!r}); "
                         f"re-run that multirun to finish it (finished jobs are skipped)")
    if not manifest.task:
        raise UsageError(f"{sweep_dir / MANIFEST} records no task (a sweep from an older sweeper); re-run the "
                         f"recorded command `{pasted('python', '-m', 'sweeper', *manifest.argv)}` to finish it")
    launcher = dict(manifest.launcher or {"name": "local"})
    sweeper_cfg = {"dir": str(sweep_dir), "report": True, "extend": False, "dry_run": False,
                   "tensorboard": bool(manifest.extra.get("tensorboard")),
                   "decision": manifest.extra.get("decision") or {}}    # the sweep's sweeper.decision, if not default
    for item in overrides:
        key, eq, raw = item.partition("=")
        if not eq or not (key.startswith("launcher.") or key == "sweeper.report") or key == "launcher.name":
            raise UsageError(f"{item!r}: accepted arguments after SWEEP_DIR are launcher.KEY=VALUE and "
                             f"sweeper.report=true|false (the plan itself is fixed by {MANIFEST})")
        value = yaml.safe_load(raw) if raw else None
        if key == "sweeper.report" and raw.strip().lower() not in ("true", "false"):
            raise UsageError(f"sweeper.report={raw!r}: expected a boolean (true or false)")
        (sweeper_cfg if key == "sweeper.report" else launcher)[key.split(".", 1)[1]] = value
    return plan_from_manifest(sweep_dir, manifest, sweeper_cfg, launcher), list(manifest.argv)


def main(argv: list[str] | None = None) -> int:
    return run_command("sweeper.resume", _main, argv)


def _main(argv: list[str], state: dict) -> int:
    if not argv:
        raise UsageError(f"{USAGE} (no SWEEP_DIR given; --help says more)")
    if argv[0] in ("-h", "--help"):
        print(USAGE + "\n\n" + docstring(sys.modules[__name__]).split("\n\n")[2])
        return 0
    plan, recorded_argv = load_plan(Path(argv[0]), argv[1:])
    backend = backend_of(plan.sweep.launcher)()
    conf = backend.config(plan.sweep.launcher)
    plan = fix_launch(plan, backend, conf)      # the recorded launch settings, whatever the overrides say; the
    backend.probe(conf)                         # machine's devices and cores checked before the cluster is asked
    return run_to_end(plan, backend, conf, recorded_argv, state)
