"""The plan of a sweep: variants x seeds -> runs with stable identities, written into the sweep directory.

    plan = make_plan(compose_sweep(argv), seeds=[0, 1, 2, 3])
    write_plan(plan, argv)     # sweep.json + runs/<variant>/seed_<k>/config.yaml (frozen, resolved)

Identity: the same run config and seed always give the same run id and run dir. The default sweep dir is
sweeps/<experiment>-<hash of the variant configs>, so re-running the same command finds its own sweep (and
resumes it) while a changed config gets a new directory. An explicit sweeper.dir that holds a different plan is
refused; more seeds extend a sweep only with sweeper.extend=true.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from sweeper.compose import Experiment, Sweep, to_yaml
from sweeper.errors import UsageError
from sweeper.seeds import format_seeds
from train.atomic import atomic_write_json, atomic_write_text, read_json
from train.config import stable_hash

MANIFEST = "sweep.json"


@dataclass(frozen=True)
class RunSpec:
    run_id: str
    variant: str
    seed: int
    run_dir: Path           # absolute
    config: dict            # the run config train.run() takes
    config_hash: str

    @property
    def label(self) -> str:
        return f"{self.variant}/seed_{self.seed}"


@dataclass
class Plan:
    sweep_dir: Path
    experiment: Experiment
    seeds: list[int]
    runs: list[RunSpec]
    variants_hash: str      # identity of the variant configs, seeds excluded
    sweep: Sweep

    def manifest(self, argv: list[str]) -> dict:
        return {
            "experiment": self.experiment.to_dict(), "seeds": self.seeds, "variants_hash": self.variants_hash,
            "variant_overrides": self.experiment.variants, "overrides": self.sweep.overrides,
            "launcher": self.sweep.launcher,
            "runs": [{"run_id": r.run_id, "variant": r.variant, "seed": r.seed,
                      "run_dir": str(r.run_dir.relative_to(self.sweep_dir)), "config_hash": r.config_hash}
                     for r in self.runs],
            "created": time.time(), "argv": argv,
        }


def default_sweep_dir(sweep: Sweep, variants_hash: str) -> Path:
    return Path("sweeps") / f"{sweep.experiment.name}-{variants_hash[:8]}"


def make_plan(sweep: Sweep, seeds: list[int]) -> Plan:
    variants_hash = stable_hash(sweep.variant_configs)
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
                variants_hash=variants_hash, sweep=sweep)


def reconcile(plan: Plan, extend: bool) -> Plan:
    """Check a new invocation against the plan recorded in its sweep dir; extend seeds only when asked."""
    recorded = read_json(plan.sweep_dir / MANIFEST)
    if recorded is None:
        return plan
    if recorded.get("variants_hash") != plan.variants_hash:
        old = set(recorded.get("experiment", {}).get("variants", []))
        what = (f"variants {sorted(old)} -> {sorted(plan.experiment.variants)}"
                if old != set(plan.experiment.variants) else "the run configs (model/data/train/health values)")
        raise UsageError(f"{plan.sweep_dir} holds a different plan ({what} differ; recorded overrides: "
                         f"{' '.join(recorded.get('overrides', [])) or 'none'}); use another sweeper.dir, or "
                         f"repeat the recorded command to resume it")
    old_seeds, new_seeds = recorded.get("seeds", []), plan.seeds
    if set(new_seeds) - set(old_seeds) and not extend:
        added = sorted(set(new_seeds) - set(old_seeds))
        raise UsageError(f"{plan.sweep_dir} was planned with seeds={format_seeds(old_seeds)}; this command asks for "
                         f"seeds={format_seeds(new_seeds)}. Add sweeper.extend=true to add seeds "
                         f"{format_seeds(added)} (finished runs are kept)")
    seeds = sorted(set(old_seeds) | set(new_seeds))
    return make_plan(plan.sweep, seeds) if seeds != plan.seeds else plan


def write_plan(plan: Plan, argv: list[str]) -> None:
    """Create the sweep dir: manifest and each run's frozen config.yaml (existing runs are left as they are)."""
    plan.sweep_dir.mkdir(parents=True, exist_ok=True)
    for run in plan.runs:
        run.run_dir.mkdir(parents=True, exist_ok=True)
        cfg_path = run.run_dir / "config.yaml"
        if not cfg_path.exists():
            atomic_write_text(cfg_path, to_yaml(run.config))
        if not (run.run_dir / "status.json").exists():
            atomic_write_json(run.run_dir / "status.json",
                              {"status": "pending", "run_id": run.run_id, "variant": run.variant, "seed": run.seed,
                               "error": None, "exit_code": None, "started": None, "ended": None})
    manifest = plan.manifest(argv)
    old = read_json(plan.sweep_dir / MANIFEST)
    if old:
        manifest["created"] = old.get("created", manifest["created"])
    atomic_write_json(plan.sweep_dir / MANIFEST, manifest)


def format_plan(plan: Plan) -> str:
    lines = [f"sweep dir: {plan.sweep_dir}",
             f"experiment {plan.experiment.name}: {len(plan.experiment.variants)} variants x {len(plan.seeds)} seeds "
             f"({format_seeds(plan.seeds)}) = {len(plan.runs)} runs; baseline {plan.experiment.baseline}, metric "
             f"{plan.experiment.metric} ({'lower' if plan.experiment.lower_is_better else 'higher'} is better)"]
    for variant, ovs in plan.experiment.variants.items():
        lines.append(f"  {variant:<20} {' '.join(ovs) or '(baseline config)'}")
    lines.append("runs:")
    lines += [f"  {r.run_id:<36} {r.run_dir.relative_to(plan.sweep_dir)}" for r in plan.runs]
    return "\n".join(lines)
