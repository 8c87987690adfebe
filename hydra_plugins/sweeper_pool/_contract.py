"""The run contract of a Hydra multirun: variants from overrides, the manifest, job run dirs, finished-job skips.

    opts, pool_params = split_params(launcher.params)          # decision-table options, the pool's
    job = describe_job(idx, overrides, sweep_config, job_dir, sweep_dir, opts)   # variant, seed, config hash
    check_jobs(jobs, opts, more_batches=False)                  # duplicates, the baseline: one line, nothing run
    write_sweep_manifest(sweep_dir, jobs, opts, launcher, earlier=None)
    prepare(job)                                                # config.yaml and a pending status
    summary = finished(job)                                     # the summary of a run that need not run again

A finished job is skipped only when it ran the same thing: the same config (config_hash) and the same task
(task_hash: the task function's name and the text of the file that defines it), so a second multirun into the
same hydra.sweep.dir whose app changed runs every job again.

A variant is a job's overrides without the seed override (hydra.* overrides left out too), named by joining them
with a space ("lr=0.01 wd=0"), or "default" when the seed is all a job overrides; values as Hydra's sweeper
writes them (lr=1e-3 -> "lr=0.001", flag=true -> "flag=True"; hydra.launcher.baseline is read the same way).
Every file goes through sweeper.run.files.rundir.
"""
from __future__ import annotations

import hashlib
import logging
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import yaml
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra.errors import CompactHydraException
from omegaconf import OmegaConf

from hydra_plugins.sweeper_pool._options import Options, option_keys
from sweeper.config.fields import unknown_key
from sweeper.run.files.experiment import Experiment
from sweeper.run.files.hashing import stable_hash
from sweeper.run.files.manifest import Manifest, RunEntry, write_manifest
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.records import Summary
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import KEEP, Status
from sweeper.run.observed.envrefs import keep_env_refs

log = logging.getLogger(__name__)
DEFAULT_VARIANT = "default"


class LaunchError(CompactHydraException):
    """A bad launcher option or sweep: Hydra prints this one line and exits 1; no job starts."""


def plain_params(params: dict) -> dict:
    return {k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v for k, v in params.items()}


def split_params(params: dict) -> tuple[Options, dict]:
    """(the decision-table options, the pool's options with n_jobs folded into max_parallel), checked."""
    plain = plain_params(params)
    unknown = sorted(set(plain) - set(option_keys()))
    if unknown:
        raise LaunchError(unknown_key(f"hydra.launcher.{unknown[0]}", option_keys()))
    opts = Options(**{k: plain.pop(k) for k in list(plain) if k in Options.__dataclass_fields__})
    if opts.baseline is not None and not isinstance(opts.baseline, str):
        raise LaunchError(f"hydra.launcher.baseline={opts.baseline!r}: must be a variant name, e.g. "
                          f"'hydra.launcher.baseline=\"lr=0.01\"'")
    for key in ("metric", "seed_key"):
        if not isinstance(getattr(opts, key), str) or not getattr(opts, key):
            raise LaunchError(f"hydra.launcher.{key}={getattr(opts, key)!r}: must be a non-empty name")
    if not isinstance(opts.lower_is_better, bool):
        raise LaunchError(f"hydra.launcher.lower_is_better={opts.lower_is_better!r}: must be true or false")
    n_jobs = plain.pop("n_jobs", None)
    if n_jobs is not None:
        if not isinstance(n_jobs, int) or isinstance(n_jobs, bool) or (n_jobs < 1 and n_jobs != -1):
            raise LaunchError(f"hydra.launcher.n_jobs={n_jobs!r}: must be a positive integer (or -1: no cap)")
        cap = None if n_jobs == -1 else n_jobs
        if plain.get("max_parallel") is not None and plain["max_parallel"] != cap:
            raise LaunchError(f"hydra.launcher.n_jobs={n_jobs} and hydra.launcher.max_parallel="
                              f"{plain['max_parallel']} disagree: n_jobs is hydra-joblib-launcher's name for "
                              f"max_parallel; give one of them")
        plain["max_parallel"] = cap
    return replace(opts, baseline=canonical_variant(opts.baseline)), plain


def canonical_variant(name: str | None) -> str | None:
    """A variant name as Hydra writes a job's overrides ("use_run=true lr=1e-3" -> "use_run=True lr=0.001")."""
    # deferred: hydra's override parser (0.2 s), only when this runs
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if not name or name == DEFAULT_VARIANT:
        return name
    try:
        overrides = OverridesParser.create().parse_overrides(name.split(" "))
    except Exception:        # not overrides (e.g. a quoted value with a space): matched as written
        return name
    if any(o.is_sweep_override() for o in overrides):
        return name
    return " ".join(f"{o.get_key_element()}={o.get_value_element_as_str()}" for o in overrides)


@dataclass
class HydraJob:
    idx: int
    overrides: list[str]
    variant: str
    variant_overrides: list[str]
    seed: int
    run_id: str
    rundir: RunDir
    run_dir: str                 # relative to the sweep dir
    config: dict                 # the job's task config (what config.yaml holds)
    config_hash: str
    task_hash: str = ""          # what it runs: task_identity(task_function)
    warnings: list[str] = field(default_factory=list)

    @property
    def shown(self) -> str:
        return " ".join(filter_overrides(self.overrides))


def _key_value(override: str) -> tuple[str, str | None]:
    key, _, value = override.partition("=")
    return key.lstrip("+~"), (value if _ else None)


def _select(config: dict, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(config, dict) or part not in config:
            return None
        config = config[part]
    return config


def task_config(sweep_config) -> dict:
    """The job's config without `hydra`, as plain YAML-able data (interpolations resolved when they can be)."""
    task = OmegaConf.masked_copy(sweep_config, [k for k in sweep_config if k != "hydra"])
    keep_env_refs(task)          # ${oc.env:SECRET} stays a reference in config.yaml (sweeper.run.observed.envrefs)
    try:
        return OmegaConf.to_container(task, resolve=True, enum_to_str=True)
    except Exception:       # e.g. ${hydra:runtime.output_dir}, only known inside the job
        return OmegaConf.to_container(task, resolve=False, enum_to_str=True)


def config_hash(config: dict) -> str:
    """The hash sweeper.init() computes from config.yaml (the YAML round trip included)."""
    return stable_hash(yaml.safe_load(yaml.safe_dump(config, sort_keys=False, default_flow_style=False)))


def task_identity(fn) -> str:
    """The hash of what a job runs: the task function's module and name, and the text of its source file (the
    app's script or module; its compiled code when there is no file to read)."""
    code = getattr(fn, "__code__", None)
    try:
        text = Path(code.co_filename).read_bytes() if code is not None else b""
    except OSError:
        text = code.co_code if code is not None else b""
    return stable_hash({"function": f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', '?')}",
                        "source": hashlib.sha256(text).hexdigest()})


def describe_job(idx: int, overrides: Sequence[str], sweep_config, job_dir: Path, sweep_dir: Path,
                 opts: Options, task_hash: str = "") -> HydraJob:
    config = task_config(sweep_config)
    variant_overrides, seed, warnings = [], None, []
    for override in filter_overrides(list(overrides)):
        key, value = _key_value(override)
        if key != opts.seed_key:
            variant_overrides.append(override)
            continue
        try:
            seed = int(value)
        except (TypeError, ValueError):
            seed = -1
        if seed < 0:
            raise LaunchError(f"job #{idx}: {override}: a seed is a non-negative integer (sweep seeds with "
                              f"{opts.seed_key}=0,1,2, or name the seed's key with hydra.launcher.seed_key)")
    if seed is None:
        own = _select(config, opts.seed_key)
        seed = own if isinstance(own, int) and not isinstance(own, bool) and own >= 0 else 0
        warnings.append(f"job #{idx} has no {opts.seed_key}=... override: recorded as seed {seed}"
                        f"{' (its config value)' if own == seed else ''}; sweep seeds with {opts.seed_key}=0,1,2 "
                        f"(or set hydra.launcher.seed_key)")
    try:
        run_dir = job_dir.resolve().relative_to(sweep_dir)
    except ValueError:
        raise LaunchError(f"job #{idx}: its output dir {job_dir} is outside hydra.sweep.dir={sweep_dir}; keep "
                          f"hydra.sweep.subdir relative (the default is ${{hydra.job.num}})") from None
    return HydraJob(idx=idx, overrides=list(overrides), variant=" ".join(variant_overrides) or DEFAULT_VARIANT,
                    variant_overrides=variant_overrides, seed=seed, run_id=str(sweep_config.hydra.job.id),
                    rundir=RunDir(sweep_dir / run_dir), run_dir=str(run_dir), config=config,
                    config_hash=config_hash(config), task_hash=task_hash, warnings=warnings)


def _runs(earlier: Manifest | None, jobs: list[HydraJob]) -> list[RunEntry]:
    mine = [RunEntry(run_id=j.run_id, variant=j.variant, seed=j.seed, run_dir=j.run_dir, config_hash=j.config_hash)
            for j in jobs]
    dirs = {e.run_dir for e in mine}
    return [e for e in (earlier.runs if earlier else []) if e.run_dir not in dirs] + mine


def check_jobs(jobs: list[HydraJob], opts: Options, earlier: Manifest | None, more_batches: bool) -> None:
    """One line and nothing launched: two jobs with one variant and seed, or a baseline that is no variant."""
    seen: dict[tuple[str, int], str] = {}
    for entry in _runs(earlier, jobs):
        other = seen.setdefault((entry.variant, entry.seed), entry.run_dir)
        if other != entry.run_dir:
            raise LaunchError(f"jobs in {other}/ and {entry.run_dir}/ are both variant {entry.variant!r} with seed "
                              f"{entry.seed}: the decision table needs one job per variant and seed; sweep the seed "
                              f"with {opts.seed_key}=0,1,2 (or name its key with hydra.launcher.seed_key)")
    variants = _variants(earlier, jobs)
    if opts.baseline is not None and opts.baseline not in variants and not more_batches:
        raise LaunchError(f"hydra.launcher.baseline={opts.baseline!r} is not a variant of this multirun; its "
                          f"variants are {', '.join(repr(v) for v in variants)}")


def _variants(earlier: Manifest | None, jobs: list[HydraJob]) -> dict[str, list[str]]:
    variants = dict(earlier.experiment.variants) if earlier else {}
    for job in jobs:
        variants.setdefault(job.variant, job.variant_overrides)
    return variants


def write_sweep_manifest(sweep_dir: Path, jobs: list[HydraJob], opts: Options, launcher,
                         earlier: Manifest | None) -> Manifest:
    """The manifest of the multirun (merged with the earlier batches' when Hydra launches in batches)."""
    config = launcher.config
    variants, runs = _variants(earlier, jobs), _runs(earlier, jobs)
    baseline = opts.baseline if opts.baseline in variants else ""   # "": none recorded (or a later batch brings it)
    fn = launcher.task_function
    manifest = Manifest(
        experiment=Experiment(name=str(config.hydra.job.name), baseline=baseline, metric=opts.metric,
                              lower_is_better=opts.lower_is_better, variants=variants),
        runs=runs, seeds=sorted({r.seed for r in runs}), variants_hash=stable_hash(variants),
        overrides=list(config.hydra.overrides.task), source="hydra", argv=list(sys.argv),
        launcher={"name": "sweeper_pool", **plain_params(launcher.params)},
        task={"kind": "hydra", "app": str(config.hydra.job.name), "cwd": os.getcwd(),
              "function": f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', '?')}"},
        resources={v: {"ranks_per_run": plain_params(launcher.params).get("ranks_per_run") or 1} for v in variants})
    write_manifest(sweep_dir, manifest)
    return manifest


def prepare(job: HydraJob, experiment: str) -> None:
    """config.yaml and a pending status, before the job's process starts. A summary left by a run of another
    config is replaced by a pending one: its result no longer applies to this dir (and must not win over a
    failure of the new config when the run's outcome is read)."""
    job.rundir.path.mkdir(parents=True, exist_ok=True)
    try:
        old = job.rundir.read_summary()
    except UnreadableFile:
        old = None
    if old is not None and old.config_hash != job.config_hash:
        job.rundir.write_summary(Summary(status=Status.PENDING, run_id=job.run_id, experiment=experiment,
                                         variant=job.variant, seed=job.seed, config_hash=job.config_hash,
                                         extra={"replaced": f"a result of config {old.config_hash}"}))
    job.rundir.write_config(job.config)
    job.rundir.update_status(Status.PENDING, run_id=job.run_id, experiment=experiment, variant=job.variant,
                             seed=job.seed, error=None, exit_code=None, started=None, ended=None, attempts=None,
                             failure_class=None, transient=None, warnings=list(job.warnings),
                             task_hash=job.task_hash)


def finished(job: HydraJob) -> Summary | None:
    """The summary of a run that already finished (or diverged) with this job's config and task, else None."""
    try:
        summary = job.rundir.read_summary()
        if summary is None or summary.config_hash != job.config_hash:
            return None
        if job.rundir.read_status().extra.get("task_hash") != job.task_hash:
            return None                                       # the app changed (or it predates task_hash)
        outcome = job.rundir.outcome()
    except UnreadableFile as e:
        log.warning(f"sweeper_pool: job #{job.idx} runs again: {e}")
        return None
    return summary if outcome in KEEP and summary.status in KEEP else None


def return_from_summary(job: HydraJob, summary: Summary, metric: str, sweep_config) -> JobReturn:
    """A COMPLETED JobReturn for a finished run whose result pickle is gone: its final metric (or metrics)."""
    final = dict(summary.final)
    value = final[metric] if set(final) == {metric} else final or None
    task_cfg = OmegaConf.masked_copy(sweep_config, [k for k in sweep_config if k != "hydra"])
    return JobReturn(overrides=job.overrides, cfg=task_cfg, hydra_cfg=sweep_config,
                     working_dir=str(job.rundir.path), task_name=str(sweep_config.hydra.job.name),
                     status=JobStatus.COMPLETED, _return_value=value)
