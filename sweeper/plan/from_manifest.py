"""A recorded plan rebuilt from its sweep dir alone: the manifest and each run's frozen config.yaml.

    plan = plan_from_manifest(sweep_dir, read_manifest(sweep_dir), sweeper={"dir": ..., "report": True, ...},
                              launcher={"name": "local", ...})      # what `python -m sweeper.resume` runs

Nothing is recomposed from the config dirs (edits since the sweep started cannot change the plan): the experiment,
seeds (as Seeds), task, launch settings and ranks per run are the manifest's. A run whose config.yaml is gone or
no longer matches the hash the manifest recorded is a UsageError (that would be a different plan).
"""
from __future__ import annotations

from pathlib import Path

from sweeper.config.seeds import Seeds
from sweeper.config.sweep import Sweep
from sweeper.config.task import TaskSpec
from sweeper.config.variants.config_diff import Declared
from sweeper.errors import UsageError
from sweeper.plan.make import Plan, RunSpec
from sweeper.run.files.hashing import stable_hash
from sweeper.run.files.manifest import MANIFEST, Manifest
from sweeper.run.files.reading import UnreadableFile


def plan_from_manifest(sweep_dir: Path, manifest: Manifest, sweeper: dict, launcher: dict) -> Plan:
    """The plan `manifest` records for `sweep_dir` (absolute), run with these sweeper.* and launcher.* blocks."""
    task = TaskSpec.from_dict(manifest.task)
    runs, variant_configs = [], {}
    for entry in manifest.runs:
        rd = manifest.run_dir(sweep_dir, entry)
        try:
            config = rd.read_config()
        except UnreadableFile as e:
            raise UsageError(f"{e}; this sweep dir is incomplete") from None
        if stable_hash(config) != entry.config_hash:
            raise UsageError(f"{rd.config_path} differs from the plan recorded in {MANIFEST} (config hash "
                             f"{stable_hash(config)} != {entry.config_hash}); restore it, or start a new sweep "
                             f"in another sweeper.dir")
        variant_configs.setdefault(entry.variant, {**config, "seed": 0})
        runs.append(RunSpec(run_id=entry.run_id, variant=entry.variant, seed=entry.seed, run_dir=rd.path,
                            config=config, config_hash=entry.config_hash))
    sweep = Sweep(overrides=list(manifest.overrides), cfg={"sweeper": sweeper, "launcher": launcher},
                  experiment=manifest.experiment, task=task, seeds=Seeds.of(manifest.seeds),
                  variant_configs=variant_configs,
                  variant_seeds={v: Seeds.of(manifest.variant_seeds[v]) if v in manifest.variant_seeds else None
                                 for v in variant_configs},
                  changes={v: [Declared.from_dict(c) for c in cs] for v, cs in manifest.changes.items()})
    return Plan(sweep_dir=sweep_dir, experiment=manifest.experiment, seeds=list(manifest.seeds), runs=runs,
                variants_hash=manifest.variants_hash, sweep=sweep, task=task,
                tensorboard=bool(sweeper.get("tensorboard")), variant_seeds=dict(manifest.variant_seeds),
                launch=manifest.launch, resources=dict(manifest.resources))    # ranks per run: the plan's
