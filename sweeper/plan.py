"""The plan of a sweep: variants x seeds -> runs with stable identities, written into the sweep directory.

    plan = make_plan(compose_sweep(argv), seeds=[0, 1, 2, 3])
    write_plan(plan, argv)     # the manifest + runs/<variant>/seed_<k>/config.yaml (frozen, resolved), pending
    plan.argv(run)             # what a backend starts for one run (in plan.task.cwd) ...
    plan.run_env(run)          # ... with these variables set (SWEEPER_RUN_DIR, SWEEPER_TENSORBOARD)

Identity: the same task, run config and seed always give the same run id and run dir. The default sweep dir is
sweeps/<experiment>-<hash of the task and variant configs>, so re-running the same command finds its own sweep
(and resumes it) while a changed config gets a new directory. An explicit sweeper.dir that holds a different
plan is refused; more seeds extend a sweep only with sweeper.extend=true.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sweeper.compose import Sweep
from sweeper.errors import UsageError
from sweeper.run import RUN_DIR_ENV, TENSORBOARD_ENV
from sweeper.run.rundir import (Experiment, Manifest, RunDir, RunEntry, Status, UnreadableFile, read_manifest,
                                stable_hash, write_manifest)
from sweeper.seeds import format_seeds
from sweeper.task import TaskSpec


@dataclass(frozen=True)
class RunSpec:
    run_id: str
    variant: str
    seed: int
    run_dir: Path           # absolute
    config: dict            # the run's config (what the run sees as run.config)
    config_hash: str

    @property
    def label(self) -> str:
        return f"{self.variant}/seed_{self.seed}"

    @property
    def rundir(self) -> RunDir:
        return RunDir(self.run_dir)

    @property
    def total_steps(self) -> int | None:
        """train.steps (the built-in trainer), else a top-level integer `steps`, else None (unknown)."""
        train = self.config.get("train")
        if isinstance(train, dict) and _is_int(train.get("steps")):
            return train["steps"]
        return self.config["steps"] if _is_int(self.config.get("steps")) else None


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass
class Plan:
    sweep_dir: Path
    experiment: Experiment
    seeds: list[int]
    runs: list[RunSpec]
    variants_hash: str      # identity of the task and the variant configs, seeds excluded
    sweep: Sweep
    task: TaskSpec
    tensorboard: bool = False

    def argv(self, run: RunSpec) -> list[str]:
        """The command line of one run (started in self.task.cwd)."""
        return self.task.argv(run.run_dir)

    def run_env(self, run: RunSpec) -> dict[str, str]:
        """Environment variables a run's process gets on top of the backend's own."""
        env = {RUN_DIR_ENV: str(run.run_dir)}
        if self.tensorboard:
            env[TENSORBOARD_ENV] = "1"
        return env

    def manifest(self, argv: list[str], created: float | None = None) -> Manifest:
        extra = {"tensorboard": True} if self.tensorboard else {}
        manifest = Manifest(
            experiment=self.experiment, seeds=list(self.seeds), variants_hash=self.variants_hash,
            overrides=list(self.sweep.overrides), launcher=dict(self.sweep.launcher), task=self.task.to_dict(),
            runs=[RunEntry(run_id=r.run_id, variant=r.variant, seed=r.seed,
                           run_dir=str(r.run_dir.relative_to(self.sweep_dir)), config_hash=r.config_hash)
                  for r in self.runs],
            argv=list(argv), extra=extra)
        if created is not None:
            manifest.created = created
        return manifest


def task_identity(task: TaskSpec | dict) -> dict:
    """What of the task shapes a run's numbers: the code it starts (not where from, nor its hooks)."""
    d = task.to_dict() if isinstance(task, TaskSpec) else task
    return {"entry": d.get("entry"), "command": list(d.get("command") or []) or None}


def plan_hash(task: TaskSpec, variant_configs: dict[str, dict]) -> str:
    return stable_hash({"task": task_identity(task), "variants": variant_configs})


def default_sweep_dir(sweep: Sweep, variants_hash: str) -> Path:
    return Path("sweeps") / f"{sweep.experiment.name}-{variants_hash[:8]}"


def make_plan(sweep: Sweep, seeds: list[int]) -> Plan:
    variants_hash = plan_hash(sweep.task, sweep.variant_configs)
    root = sweep.sweeper.get("dir") or default_sweep_dir(sweep, variants_hash)
    sweep_dir = Path(root).expanduser().resolve()
    runs = []
    for variant, base in sweep.variant_configs.items():
        for seed in seeds:
            config = {**base, "seed": seed}
            h = stable_hash(config)
            runs.append(RunSpec(run_id=f"{variant}-s{seed}-{h[:8]}", variant=variant, seed=seed,
                                run_dir=sweep_dir / "runs" / variant / f"seed_{seed}", config=config, config_hash=h))
    return Plan(sweep_dir=sweep_dir, experiment=sweep.experiment, seeds=list(seeds), runs=runs,
                variants_hash=variants_hash, sweep=sweep, task=sweep.task,
                tensorboard=bool(sweep.sweeper.get("tensorboard")))


def recorded(sweep_dir: Path) -> Manifest | None:
    """The manifest in a sweep dir (None when there is none); a damaged one is a UsageError naming the file."""
    try:
        return read_manifest(sweep_dir)
    except UnreadableFile as e:
        raise UsageError(str(e)) from None


def reconcile(plan: Plan, extend: bool) -> Plan:
    """Check a new invocation against the plan recorded in its sweep dir; extend seeds only when asked."""
    old = recorded(plan.sweep_dir)
    if old is None:
        return plan
    if old.variants_hash != plan.variants_hash:
        if set(old.experiment.variants) != set(plan.experiment.variants):
            what = f"variants {sorted(old.experiment.variants)} -> {sorted(plan.experiment.variants)}"
        elif old.task and task_identity(old.task) != task_identity(plan.task):
            before = old.task.get("entry") or " ".join(old.task.get("command") or [])
            what = f"the task ({before} -> {plan.task.name})"
        else:
            what = "the run configs"
        raise UsageError(f"{plan.sweep_dir} holds a different plan ({what} differ; recorded overrides: "
                         f"{' '.join(old.overrides) or 'none'}); use another sweeper.dir, or "
                         f"repeat the recorded command to resume it")
    old_seeds, new_seeds = old.seeds, plan.seeds
    if set(new_seeds) - set(old_seeds) and not extend:
        added = sorted(set(new_seeds) - set(old_seeds))
        raise UsageError(f"{plan.sweep_dir} was planned with seeds={format_seeds(old_seeds)}; this command asks for "
                         f"seeds={format_seeds(new_seeds)}. Add sweeper.extend=true to add seeds "
                         f"{format_seeds(added)} (finished runs are kept)")
    seeds = sorted(set(old_seeds) | set(new_seeds))
    return make_plan(plan.sweep, seeds) if seeds != plan.seeds else plan


def write_plan(plan: Plan, argv: list[str]) -> None:
    """Create the sweep dir: the manifest, each run's frozen config and its pending status (existing runs are
    left as they are)."""
    plan.sweep_dir.mkdir(parents=True, exist_ok=True)
    for run in plan.runs:
        rd = run.rundir
        rd.path.mkdir(parents=True, exist_ok=True)
        if not rd.config_path.exists():
            rd.write_config(run.config)
        if not rd.status_path.exists():
            rd.update_status(Status.PENDING, run_id=run.run_id, experiment=plan.experiment.name,
                             variant=run.variant, seed=run.seed)
    old = recorded(plan.sweep_dir)
    write_manifest(plan.sweep_dir, plan.manifest(argv, created=old.created if old else None))


def format_plan(plan: Plan) -> str:
    lines = [f"sweep dir: {plan.sweep_dir}",
             f"task: {plan.task.name} (in {plan.task.cwd})",
             f"experiment {plan.experiment.name}: {len(plan.experiment.variants)} variants x {len(plan.seeds)} seeds "
             f"({format_seeds(plan.seeds)}) = {len(plan.runs)} runs; baseline {plan.experiment.baseline}, metric "
             f"{plan.experiment.metric} ({'lower' if plan.experiment.lower_is_better else 'higher'} is better)"]
    for variant, ovs in plan.experiment.variants.items():
        lines.append(f"  {variant:<20} {' '.join(ovs) or '(baseline config)'}")
    lines.append("runs:")
    lines += [f"  {r.run_id:<36} {r.run_dir.relative_to(plan.sweep_dir)}" for r in plan.runs]
    return "\n".join(lines)
