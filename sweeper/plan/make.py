"""The plan of a sweep: variants x seeds -> runs with stable identities, written into the sweep directory.

    plan = make_plan(compose_sweep(argv))      # the sweep's Seeds (seeds=), a variant's own seeds= override honoured
    plan = make_plan(sweep, seeds=[0, 1, 2, 3])  # other seeds (a list is taken as Seeds: tests, adaptive looks)
    keep_recorded_launch(plan, Launch(threads_per_run=1))        # launch settings fixed by the FIRST plan
    write_plan(plan, argv)     # runs/<variant>/seed_<k>/config.yaml (frozen, resolved), pending; then the manifest
    plan.argv(run)             # what a backend starts for one run (in plan.task.cwd) ...
    plan.run_env(run)          # ... with these variables set (SWEEPER_RUN_DIR, SWEEPER_TENSORBOARD)

Identity: the same task, run config and seed always give the same run id and run dir. The default sweep dir is
sweeps/<experiment>-<hash of the task and variant configs>, so re-running the same command finds its own sweep
(and resumes it) while a changed config gets a new directory. An explicit sweeper.dir that holds a different
plan is refused; more seeds extend a sweep only with sweeper.extend=true.

Launch settings that change a run's numbers (Launch: the thread count of every run) are computed once from the
launcher config and the full plan, recorded in the manifest and kept by every later launch of the sweep (a
resume with fewer runs left, another launcher.max_parallel): a run's result never depends on how it was
launched. A plan above sweeper.max_runs runs (default 1000) is refused before anything is written, and before
a seed list is built (sweeper.plan.size). Writing the
plan is idempotent (every file atomic, the manifest last; Ctrl-C waits until it is complete), so a write cut
short by SIGKILL is completed by the same command.

Resources per variant (sweeper.config.variants.resources: experiment.resources, else launcher.ranks_per_run) are part of
the plan: plan.ranks_of(variant) is how many ranks each of its runs has, recorded in the manifest (`resources`)
and shown by the dry run; a plan with a run of more than one rank has them in its identity (the sweep dir's
hash), so the same command with another world size is another sweep, never a resume of this one.
"""
from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sweeper.config.decision import DecisionOptions
from sweeper.config.seeds import Seeds, format_seeds
from sweeper.config.sweep import Sweep
from sweeper.config.task import BUILTIN, LEGACY_BUILTIN, TaskSpec
from sweeper.config.variants.config_diff import describe, diff_configs
from sweeper.config.variants.resources import effective_resources, ranks_of
from sweeper.errors import UsageError
from sweeper.interrupts import held_interrupts
from sweeper.pasted import pasted
from sweeper.plan.size import check_size
from sweeper.run import RUN_DIR_ENV, TENSORBOARD_ENV
from sweeper.run.files.atomic import one_sync
from sweeper.run.files.experiment import Experiment
from sweeper.run.files.hashing import stable_hash
from sweeper.run.files.manifest import Launch, Manifest, RunEntry, read_manifest, write_manifest
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.records import StatusRecord
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import Status


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


@dataclass(frozen=True)
class Reused:
    """A planned run an earlier sweep already ran (sweeper.store.lookup found it): its run dir and identity key."""
    source: Path            # the earlier run's run dir (absolute)
    key: str                # sweeper.store.identity.run_key of its inputs


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
    variant_seeds: dict[str, list[int]] = field(default_factory=dict)   # variants whose seeds differ from seeds
    launch: Launch = field(default_factory=Launch)    # settings that change numbers (keep_recorded_launch)
    notes: list[str] = field(default_factory=list)    # what the launch should tell the user (kept settings)
    resources: dict[str, dict] = field(default_factory=dict)   # variant -> {"ranks_per_run": N} (every variant)
    reused: dict[str, Reused] = field(default_factory=dict)    # run_id -> the earlier run it reuses (sweeper.store)

    def ranks_of(self, variant: str) -> int:
        """How many ranks (processes, one GPU each where GPUs exist) each run of `variant` has."""
        return ranks_of(self.resources, variant)

    def seeds_of(self, variant: str) -> list[int]:
        """The seeds `variant` runs: its own seeds= override, else the sweep's."""
        return list(self.variant_seeds.get(variant, self.seeds))

    def argv(self, run: RunSpec) -> list[str]:
        """The command line of one run (started in self.task.cwd)."""
        return self.task.argv(run.run_dir, run.config, self.experiment.metric)

    def run_env(self, run: RunSpec) -> dict[str, str]:
        """Environment variables a run's process gets on top of the backend's own."""
        env = {RUN_DIR_ENV: str(run.run_dir)}
        if self.tensorboard:
            env[TENSORBOARD_ENV] = "1"
        return env

    def manifest(self, argv: list[str], created: float | None = None) -> Manifest:
        extra = {"tensorboard": True} if self.tensorboard else {}
        journal = self.sweep.sweeper.journal
        if journal:                   # the journal this sweep's reports go to (sweeper.report, resume)
            extra["journal"] = journal if journal.lower() == "off" else str(Path(os.path.expanduser(journal)).resolve())
        decision = self.sweep.sweeper.decision
        if decision != DecisionOptions():   # what its reports decide by (sweeper.resume reads it); default: unrecorded
            extra["decision"] = asdict(decision)
        manifest = Manifest(
            experiment=self.experiment, seeds=list(self.seeds), variants_hash=self.variants_hash,
            overrides=list(self.sweep.overrides), launcher=dict(self.sweep.launcher), task=self.task.to_dict(),
            runs=[RunEntry(run_id=r.run_id, variant=r.variant, seed=r.seed,
                           run_dir=str(r.run_dir.relative_to(self.sweep_dir)), config_hash=r.config_hash)
                  for r in self.runs],
            argv=list(argv), launch=self.launch, variant_seeds={k: list(v) for k, v in self.variant_seeds.items()},
            changes={v: [d.to_dict() for d in ds] for v, ds in self.sweep.changes.items()}, extra=extra,
            resources={v: dict(r) for v, r in self.resources.items()})
        if created is not None:
            manifest.created = created
        return manifest


def task_identity(task: TaskSpec | dict) -> dict:
    """What of the task shapes a run's numbers: the code it starts (not where from, nor its hooks)."""
    d = task.to_dict() if isinstance(task, TaskSpec) else task
    entry = LEGACY_BUILTIN["entry"] if d.get("entry") == BUILTIN["entry"] else d.get("entry")   # same sweep dir
    out = {"entry": entry, "command": list(d.get("command") or []) or None}    # as before the package move
    if d.get("args") not in (None, "none"):   # what a command is given changes what it computes
        out["args"] = d["args"]
    return out


def plan_hash(task: TaskSpec, variant_configs: dict[str, dict], resources: dict[str, dict] | None = None) -> str:
    """The plan's identity; resources count once a variant has more than one rank (older plans hash as before)."""
    wide = {v: r for v, r in (resources or {}).items() if ranks_of(resources, v) != 1}
    extra = {"resources": wide} if wide else {}
    return stable_hash({"task": task_identity(task), "variants": variant_configs, **extra})


def default_sweep_dir(sweep: Sweep, variants_hash: str) -> Path:
    return Path("sweeps") / f"{sweep.experiment.name}-{variants_hash[:8]}"


def make_plan(sweep: Sweep, seeds: Seeds | list[int] | None = None,
              variant_seeds: dict[str, Seeds | list[int]] | None = None) -> Plan:
    """The plan: every variant x its seeds: variant_seeds (default: the variants' own `seeds=` overrides,
    sweep.variant_seeds), else `seeds` (default: the sweep's, sweep.seeds). Refused (UsageError) above
    sweeper.max_runs runs, counted before any seed list is built (seeds=0-10**12 stays cheap)."""
    seeds = _typed(sweep.seeds if seeds is None else seeds)
    if variant_seeds is None:
        variant_seeds = {v: s for v, s in sweep.variant_seeds.items() if s is not None}
    typed = {v: _typed(variant_seeds[v]) for v in sweep.variant_configs if v in variant_seeds}
    check_size(sweep, {v: typed.get(v, seeds).count for v in sweep.variant_configs})
    own = {v: s.to_list() for v, s in typed.items() if s != seeds}
    seeds = seeds.to_list()
    resources = effective_resources(sweep.variant_configs, sweep.resources, sweep.launcher)
    variants_hash = plan_hash(sweep.task, sweep.variant_configs, resources)
    if sweep.task.command:                    # every {key} of the command names a run-config key
        for base in sweep.variant_configs.values():
            sweep.task.check_placeholders({**base, "seed": 0})
    root = sweep.sweeper.dir or default_sweep_dir(sweep, variants_hash)
    sweep_dir = Path(os.path.expanduser(root)).resolve()
    runs = []
    for variant, base in sweep.variant_configs.items():
        for seed in own.get(variant, seeds):
            config = {**base, "seed": seed}
            h = stable_hash(config)
            runs.append(RunSpec(run_id=f"{variant}-s{seed}-{h[:8]}", variant=variant, seed=seed,
                                run_dir=sweep_dir / "runs" / variant / f"seed_{seed}", config=config, config_hash=h))
    return Plan(sweep_dir=sweep_dir, experiment=sweep.experiment, seeds=list(seeds), runs=runs,
                variants_hash=variants_hash, sweep=sweep, task=sweep.task,
                tensorboard=bool(sweep.sweeper.tensorboard), variant_seeds=own, resources=resources)


def _typed(seeds: Seeds | list[int]) -> Seeds:
    """A list of seeds (a test's, an adaptive look's, a recorded plan's) as Seeds."""
    return seeds if isinstance(seeds, Seeds) else Seeds.of(seeds)


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
    check_same_project(plan, old.task)
    if old.variants_hash != plan.variants_hash:
        if set(old.experiment.variants) != set(plan.experiment.variants):
            what = f"variants {sorted(old.experiment.variants)} -> {sorted(plan.experiment.variants)}"
        elif old.task and task_identity(old.task) != task_identity(plan.task):
            before = old.task.get("entry") or " ".join(old.task.get("command") or [])
            what = f"the task ({before} -> {plan.task.name})"
        elif any(ranks_of(old.resources, v) != plan.ranks_of(v) for v in plan.experiment.variants):
            what = "the ranks per run (" + ", ".join(f"{v}: {ranks_of(old.resources, v)} -> {plan.ranks_of(v)}"
                                                     for v in plan.experiment.variants
                                                     if ranks_of(old.resources, v) != plan.ranks_of(v)) + ")"
        else:
            what = "the run configs"
        raise UsageError(f"{plan.sweep_dir} holds a different plan ({what} differ; recorded overrides: "
                         f"{' '.join(old.overrides) or 'none'}); use another sweeper.dir, or "
                         f"repeat the recorded command to resume it")
    added = {v: sorted(set(plan.seeds_of(v)) - set(old.seeds_of(v))) for v in plan.experiment.variants}
    added = {v: a for v, a in added.items() if a}
    if added and not extend:
        if all(plan.seeds_of(v) == plan.seeds and old.seeds_of(v) == old.seeds for v in plan.experiment.variants):
            ask, now = f"seeds={format_seeds(plan.seeds)}", format_seeds(sorted(set(plan.seeds) - set(old.seeds)))
            raise UsageError(f"{plan.sweep_dir} was planned with seeds={format_seeds(old.seeds)}; this command asks "
                             f"for {ask}. Add sweeper.extend=true to add seeds {now} (finished runs are kept)")
        what = "; ".join(f"{v}: seeds {format_seeds(old.seeds_of(v))} -> +{format_seeds(a)}" for v, a in added.items())
        raise UsageError(f"{plan.sweep_dir} was planned with fewer seeds ({what}). Add sweeper.extend=true to add "
                         f"them (finished runs are kept)")
    seeds = sorted(set(old.seeds) | set(plan.seeds))
    own = {v: sorted(set(old.seeds_of(v)) | set(plan.seeds_of(v))) for v in plan.experiment.variants}
    own = {v: s for v, s in own.items() if s != seeds}
    merged = plan if seeds == plan.seeds and own == plan.variant_seeds else make_plan(plan.sweep, seeds, own)
    if merged is not plan:
        merged.notes[:0] = plan.notes
    if set(plan.seeds) < set(old.seeds):           # seeds=0-1 on a sweep dir that holds 0-3: say what is reported
        merged.notes.append(f"seeds={format_seeds(plan.seeds)}: {plan.sweep_dir.name} already holds seeds "
                            f"{format_seeds(old.seeds)} of this experiment; the report covers all {len(seeds)} "
                            f"seeds it holds, not only {format_seeds(plan.seeds)} (for those alone: another "
                            f"sweeper.dir)")
    return merged


def check_same_project(plan: Plan, recorded_task: dict) -> None:
    """A sweep dir holds the runs of one task's code: a user's task run from another project folder (its code is
    found there: task.cwd) is refused, not pooled with the recorded runs. The built-in trainer is sweeper's own
    code, wherever it runs from; a project folder that no longer exists (moved) is not held against it."""
    before = recorded_task.get("cwd")
    if not before or plan.task.entry == BUILTIN["entry"] or Path(before) == Path(plan.task.cwd):
        return
    if not Path(before).is_dir():
        plan.notes.append(f"{plan.sweep_dir.name} was started from {before}, which is gone; its runs continue from "
                          f"{plan.task.cwd}")
        return
    raise UsageError(f"sweeper.dir={plan.sweep_dir} holds a sweep of the task in {before}; this command runs the task "
                     f"in {plan.task.cwd} (another project folder: another script, its runs not comparable): use "
                     f"another sweeper.dir, or run the command from {before} to resume it")


def keep_recorded_launch(plan: Plan, computed: Launch) -> Plan:
    """Fix plan.launch: the settings recorded in its sweep dir when it has them (a note says when this command
    would have given others), else `computed` (from the launcher config and the full plan)."""
    old = recorded(plan.sweep_dir)
    kept = old.launch if old is not None and old.launch != Launch() else None
    if kept is None:
        plan.launch = computed
        return plan
    plan.launch = kept
    changed = kept.differences(computed)
    if changed:
        plan.notes.append(f"kept the launch settings recorded in {plan.sweep_dir.name}: {', '.join(changed)}; a "
                          f"run's numbers depend on them, so every run of a sweep gets the same (start a new "
                          f"sweeper.dir for other settings)")
    return plan


def repair_stale(plan: Plan) -> list[str]:
    """Runs recorded `running` whose process is gone (a killed sweeper) become interrupted (or finished, when
    their summary says so): labels of the runs repaired. Call with the sweep lock held."""
    repaired = []
    for run in plan.runs:
        if run.rundir.repair_stale() is not None:
            repaired.append(run.label)
    return repaired


def write_plan(plan: Plan, argv: list[str]) -> None:
    """Create the sweep dir: each run's frozen config and its pending status (existing runs are left as they
    are), then the manifest. Idempotent: a write cut short is completed by the same call, so SIGINT/SIGTERM are
    answered between two runs' files (KeyboardInterrupt; never inside a file, and the manifest, written last, is
    whole or absent): Ctrl-C during a plan of 10,000 runs stops it at once."""
    with held_interrupts() as pending:
        old = recorded(plan.sweep_dir)
        plan.sweep_dir.mkdir(parents=True, exist_ok=True)
        with one_sync(plan.sweep_dir):           # one sync of the file system, not 4 fsyncs per run
            for run in plan.runs:
                pending.check()
                rd = run.rundir
                rd.path.mkdir(parents=True, exist_ok=True)
                _write_config(rd, run, planned=old is not None)
                if not rd.status_path.exists():
                    rd.write_status(StatusRecord(Status.PENDING, run_id=run.run_id, experiment=plan.experiment.name,
                                                 variant=run.variant, seed=run.seed))
        pending.check()
        write_manifest(plan.sweep_dir, plan.manifest(argv, created=old.created if old else None))


def _write_config(rd: RunDir, run: RunSpec, planned: bool) -> None:
    """The run's frozen config; one already there stays when the sweep's plan was recorded. Without a recorded
    plan (a write cut short), another config there is replaced when its run never started, else refused."""
    if planned and rd.config_path.exists():
        return
    try:
        current = stable_hash(rd.read_config()) if rd.config_path.exists() else None
    except UnreadableFile:
        current = "damaged"
    if current == run.config_hash:
        return
    if current is not None and (rd.summary_path.exists() or rd.has_checkpoint() or rd.metrics_path.exists()):
        raise UsageError(f"{rd.config_path} holds another run config than this plan's (config hash {current} != "
                         f"{run.config_hash}); use another sweeper.dir, or repeat the command that started it")
    rd.write_config(run.config)


def format_plan(plan: Plan) -> str:
    lines = [f"sweep dir: {plan.sweep_dir}",
             f"task: {plan.task.name} (in {plan.task.cwd})" + (
                 f"\n  first run's command: {pasted(*_shown_words(plan, plan.runs[0]))}"
                 if plan.task.command and plan.runs else ""),
             f"experiment {plan.experiment.name}: {len(plan.experiment.variants)} variants x {len(plan.seeds)} seeds "
             f"({format_seeds(plan.seeds)}) = {len(plan.runs)} runs; baseline {plan.experiment.baseline}, metric "
             f"{plan.experiment.metric} ({'lower' if plan.experiment.lower_is_better else 'higher'} is better)"]
    if plan.variant_seeds:
        own = f", variants' own seeds below = {len(plan.runs)} runs"
        lines[-1] = lines[-1].replace(f" = {len(plan.runs)} runs", own)
    if plan.launch.threads_per_run is not None:
        per = "rank" if any(plan.ranks_of(v) > 1 for v in plan.experiment.variants) else "run"
        lines.append(f"launch: {plan.launch.threads_per_run} thread(s) per {per} (fixed by the plan)")
    wide = {v: plan.ranks_of(v) for v in plan.experiment.variants if plan.ranks_of(v) != 1}
    if wide:
        lines.append(
            "resources: "
            + ", ".join(f"{v} {n} ranks per run" for v, n in wide.items())
            + (", the others 1" if len(wide) < len(plan.experiment.variants) else "")
        )
    if plan.experiment.hypothesis:
        lines.append(f"hypothesis: {plan.experiment.hypothesis}")

    configs, baseline = plan.sweep.variant_configs, plan.experiment.baseline
    for variant, ovs in plan.experiment.variants.items():
        own = f"  [seeds {format_seeds(plan.variant_seeds[variant])}]" if variant in plan.variant_seeds else ""
        changed = ""
        if variant != baseline and variant in configs and baseline in configs:
            changed = "  -> " + describe(
                diff_configs(configs[baseline], configs[variant]), plan.sweep.changes.get(variant, [])
            )
        ranks = f"  [{plan.ranks_of(variant)} ranks]" if plan.ranks_of(variant) != 1 else ""
        lines.append(f"  {variant:<20} {' '.join(ovs) or '(baseline config)'}{own}{ranks}{changed}")
    lines.append("runs:")
    lines += [f"  {r.run_id:<36} {r.run_dir.relative_to(plan.sweep_dir)}" for r in plan.runs]
    return "\n".join(lines)


def _shown_words(plan: Plan, run: RunSpec) -> list[str]:
    """What the user's program of one run gets (its words after sweeper.run.command's own), paths shortened."""
    argv = plan.argv(run)
    words = argv[argv.index("--") + 1 :] if "--" in argv else argv

    words = ["python" if w == sys.executable else w for w in words]
    return [w.replace(str(plan.sweep_dir), "SWEEP_DIR") for w in words]
