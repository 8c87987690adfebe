"""The sweep a command line describes: its experiment, its task, one validated run config per variant.

    sweep = compose_sweep(["+experiment=rope", "seeds=0-3", "train.steps=100"])
    sweep.experiment.variants      # {"rope": [], "nope": ["model.pos_encoding=none"], ...}
    sweep.task                     # TaskSpec: what every run starts (conf/task/*.yaml or the experiment's task:)
    sweep.variant_configs["nope"]  # the run config (seed 0; the plan sets each run's seed)
    sweep.seeds                    # Seeds: the sweep's `seeds=`, parsed once here (sweeper.config.seeds)
    sweep.variant_seeds["nope"]    # that variant's own `seeds=` override as Seeds, or None (the sweep's seeds)
    sweep.sweeper                  # the typed sweeper: block (SweeperConf)

A run's config is every top-level key of the composed config except the sweeper's own (run_config.RESERVED),
plus `seed`. Command-line overrides apply to every variant; a variant's own overrides are applied after them.
Every bad task, or value the task's validate hook refuses, is a one-line UsageError before anything starts.
"""
from __future__ import annotations

import functools
import inspect
import os
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from sweeper.config.composition.argv import key_of
from sweeper.config.composition.compose import missing_keys
from sweeper.config.composition.hydra_errors import missing_message, package_hint
from sweeper.config.composition.search import available, experiment_file, where_searched
from sweeper.config.composition.variant_composer import VariantComposer
from sweeper.config.fields import build, keys_of, show, unknown_key
from sweeper.config.integrity import CHECK_NAMES, direction_warnings
from sweeper.config.launchers import launcher_conf
from sweeper.config.names import check_name
from sweeper.config.run_config import run_config
from sweeper.config.schema import SweeperConf
from sweeper.config.seeds import Seeds
from sweeper.config.task import TaskCheck, TaskSpec, check_command, parse_task
from sweeper.config.variants.ablation import check_ablation
from sweeper.config.variants.resources import effective_resources, read_resources
from sweeper.config.variants.variant_overrides import check_variant_overrides
from sweeper.errors import UsageError
from sweeper.run.entry import call_problem, load_entry
from sweeper.run.files.experiment import Experiment


@dataclass
class Sweep:
    overrides: list[str]
    cfg: dict                               # the composed config (command-line overrides, no variant)
    experiment: Experiment
    task: TaskSpec
    seeds: Seeds                            # the sweep's seeds= (fixed, counted before built, or adaptive)
    variant_configs: dict[str, dict] = field(default_factory=dict)   # variant -> run config (seed 0)
    variant_seeds: dict[str, Seeds | None] = field(default_factory=dict)  # variant -> its own seeds= or None
    changes: dict[str, list] = field(default_factory=dict)    # variant -> [config_diff.Declared] vs the baseline
    resources: dict[str, dict] = field(default_factory=dict)  # experiment.resources, checked (variants/resources.py)
    warnings: list[str] = field(default_factory=list)         # what the user should hear before launch

    @functools.cached_property
    def sweeper(self) -> SweeperConf:
        """The typed `sweeper:` block (its defaults live in SweeperConf only)."""
        return build(SweeperConf, dict(self.cfg["sweeper"]), "sweeper")

    @property
    def launcher(self) -> dict:
        return self.cfg["launcher"]


def _experiment_file(overrides: list[str]) -> str:
    name = next((o.split("=", 1)[1] for o in reversed(overrides) if key_of(o) == "experiment" and "=" in o), None)
    return str(experiment_file(overrides) or f"experiment/{name}.yaml")


def read_experiment(cfg: dict, overrides: list[str] = ()) -> Experiment:
    """The composed experiment.* typed by its schema (sweeper.run.files.experiment.Experiment, the record the
    manifest stores); errors name the file. experiment.resources is checked apart (read_resources)."""
    exp = cfg.get("experiment")
    if not exp:
        raise UsageError("no experiment given: add +experiment=NAME (available: "
                         + ", ".join(available("experiment", overrides)) + f"; {where_searched(overrides)})")
    where = _experiment_file(overrides)
    if not isinstance(exp, dict):
        raise UsageError(f"experiment={exp!r}: an experiment is a mapping (name, baseline, metric, "
                         f"lower_is_better, variants) in {where}")
    for key in ("name", "baseline", "metric", "lower_is_better", "variants"):
        if key not in exp:
            hint = package_hint(overrides)
            raise UsageError(hint or f"experiment.{key} is missing in {where}")
    variants = exp["variants"] or {}
    if not isinstance(variants, dict) or not variants:
        raise UsageError("experiment.variants must map variant names to lists of overrides")
    if isinstance(exp.get("name"), str):
        check_name("experiment.name", exp["name"], "the sweep dir, sweeps/<name>-<hash>")
    for vname, ovs in variants.items():
        check_name("variant name", vname, "the folder runs/<variant>/ of its runs")
        if ovs is not None and not (isinstance(ovs, list) and all(isinstance(o, str) for o in ovs)):
            raise UsageError(f"experiment.variants.{vname} must be a list of 'key=value' overrides")
    try:
        read_resources(exp, variants, overrides)        # its own one-line errors (unknown variant, range)
        keys = [*keys_of(Experiment), "resources"]      # experiment.resources: typed apart, just above
        unknown = sorted(set(exp) - set(keys))
        if unknown:
            raise UsageError(unknown_key(f"experiment.{unknown[0]}", keys))
        conf = build(Experiment, {k: v for k, v in exp.items() if k != "resources"}, "experiment")
        if any(k not in CHECK_NAMES for k in conf.silence):
            raise UsageError(f"experiment.silence={show(exp.get('silence'))}: must map names of checks across runs "
                             f"({', '.join(CHECK_NAMES)}) to the reason the report prints")
    except UsageError as e:
        raise UsageError(f"{e} (in {where})") from None
    if conf.baseline not in conf.variants:
        raise UsageError(f"experiment.baseline={conf.baseline!r} is not one of the variants: "
                         f"{', '.join(conf.variants)}")
    dropped = {key_of(o).removeprefix("experiment.variants.") for o in overrides
               if o.startswith("~experiment.variants.")}       # a dropped variant takes its notes along
    return replace(
        conf, variants={str(k): list(v or []) for k, v in conf.variants.items()},
        notes={str(k): str(v) for k, v in conf.notes.items() if k not in dropped},
        controls=[str(v) for v in conf.controls if v not in dropped],
        bundles=[str(v) for v in conf.bundles if v not in dropped])


def check_schemas(cfg: dict) -> None:
    """The ranges of sweeper.* and launcher.* (their schema's rules, before anything starts); cfg["sweeper"]
    becomes the checked block (`preflight: false` reads as off). task.* is checked by read_task."""
    cfg["sweeper"] = asdict(build(SweeperConf, cfg.get("sweeper"), "sweeper"))
    launcher_conf(cfg.get("launcher"))


def read_task(cfg: dict, cwd: str | Path | None = None) -> TaskSpec:
    """The composed `task:` block; a relative task.cwd is relative to `cwd` (default: this process's cwd)."""
    return parse_task(cfg.get("task"), cwd=cwd or os.getcwd())


def compose_sweep(overrides: list[str], start_checks: bool = True) -> Sweep:
    """Compose the sweep and every variant, check every key, value, seed and name (nothing started, no user
    code imported), then (start_checks) the task: its validate hook on each run config, in this process, and
    its import probe (check_task_started). Raises UsageError before anything is written.
    start_checks=False: the caller runs check_task_started itself once its own cheap checks have passed (the
    plan, the sweep dir), so that no process starts for a command line that is bad anywhere."""
    compose = VariantComposer(overrides)              # Hydra composes the command line once, not per variant
    cfg = compose(overrides)
    check_schemas(cfg)
    experiment = read_experiment(cfg, overrides)
    task = read_task(cfg)
    seeds = Seeds.parse(cfg.get("seeds"))             # the sweep's seeds=, once, before composing each variant
    sweep = _compose_variants(cfg, overrides, experiment, task, seeds, compose)
    _check_missing(sweep)
    if start_checks:
        check_task_started(sweep)
    return sweep


def check_task_started(sweep: Sweep, alongside=None) -> None:
    """The checks that import the user's code or start a process, in that order, after every cheap check: the
    task's validate hook on each variant's run config (imported here, no process), then the task's import probe
    (a fresh interpreter imports task.entry and its hooks and checks their signatures), with alongside() (the
    backend's probes: nvidia-smi, sbatch --test-only) run while the probe imports. A task that cannot start is
    named first; then what alongside() raised."""
    check_command(sweep.task)                         # a missing program or script: file checks, no process
    _validate(sweep)
    sweeper_cfg = sweep.cfg.get("sweeper") or {}
    with TaskCheck(sweep.task, preflight=sweeper_cfg.get("preflight") not in (None, False, "off")
                   or (sweeper_cfg.get("baseline_first", True) and len(sweep.experiment.variants) > 1)) as check:
        refused = None
        if alongside is not None:
            try:
                alongside()
            except UsageError as e:
                refused = e
        check.wait()
    if refused is not None:
        raise refused


def _compose_variants(cfg: dict, overrides: list[str], experiment: Experiment, task: TaskSpec,
                      seeds: Seeds, compose: VariantComposer) -> Sweep:
    """Every variant's run config and seeds, and the ablation check: nothing started, nothing written."""
    sweep = Sweep(overrides=list(overrides), cfg=cfg, experiment=experiment, task=task, seeds=seeds,
                  resources=read_resources(cfg["experiment"], experiment.variants, overrides))
    check_variant_overrides(cfg, experiment, overrides)     # every variant's keys at once, before any compose
    for variant, variant_overrides in experiment.variants.items():
        try:
            vcfg = compose(list(overrides) + variant_overrides) if variant_overrides else cfg
        except UsageError as e:
            raise UsageError(f"experiment {experiment.name}, variant {variant}: {e}") from None
        if vcfg.get("task") != cfg.get("task"):
            raise UsageError(f"experiment {experiment.name}, variant {variant}: a variant cannot change task.*; "
                             f"a sweep runs one task (set it in the experiment or on the command line)")
        sweep.variant_configs[variant] = run_config(vcfg)
        sweep.variant_seeds[variant] = _variant_seeds(experiment.name, variant, variant_overrides, vcfg)
    sweep.changes, sweep.warnings = check_ablation(sweep, compose)
    sweep.warnings = direction_warnings(experiment) + list(sweep.warnings)   # the name warns; the curves decide
    return sweep


def _variant_seeds(name: str, variant: str, overrides: list[str], vcfg: dict) -> Seeds | None:
    """A variant's own `seeds=` override, parsed, never built (None when it has none: it runs the sweep's
    seeds). Its size is checked with the plan's (sweeper.plan.size.check_size)."""
    if not any(key_of(o) == "seeds" for o in overrides):
        return None
    try:
        return Seeds.parse(vcfg.get("seeds"), adaptive=False)
    except UsageError as e:
        raise UsageError(f"experiment {name}, variant {variant}: {e}") from None


def _check_missing(sweep: Sweep) -> None:
    """No `???` left in any variant's run config (a required key the command line must set)."""
    _refuse(sweep, {v: missing_message(m[0]) for v, c in sweep.variant_configs.items() if (m := missing_keys(c))})


def _validate(sweep: Sweep) -> None:
    """Each variant's run config accepted by the task's validate hook (loaded here, its signature checked)."""
    hook = load_hook(sweep.task, "validate")
    if hook is None:
        return
    problem = call_problem(hook, "validate", sweep.task.validate)
    if problem:
        raise UsageError(problem)
    errors: dict[str, str] = {}
    resources = effective_resources(sweep.variant_configs, sweep.resources, sweep.launcher)
    for variant, config in sweep.variant_configs.items():
        try:
            _call_validate(hook, dict(config), {**sweep.launcher, **resources[variant]})  # its own ranks
        except ValueError as e:  # ConfigError and UsageError are ValueErrors
            errors[variant] = (str(e).strip().splitlines() or [type(e).__name__])[0]
        except Exception as e:  # noqa: BLE001 - a bug in the hook: still one line before anything starts
            errors[variant] = f"task.validate={sweep.task.validate} raised {type(e).__name__}: {e}".splitlines()[0]
    _refuse(sweep, errors)


def _refuse(sweep: Sweep, errors: dict[str, str]) -> None:
    """UsageError for the first variant's error; an error every variant shares (a command-line value) is
    reported once, without a variant name."""
    if not errors:
        return
    variant, message = next(iter(errors.items()))
    if len(errors) == len(sweep.variant_configs) and len(set(errors.values())) == 1:
        raise UsageError(message)
    raise UsageError(f"variant {variant}: {message}")


def _call_validate(hook, config: dict, launcher: dict) -> None:
    """task.validate(config), or validate(config, launcher=...) when the hook takes a `launcher` argument (to
    check what depends on where runs start, e.g. a GPU the local launcher must offer)."""
    try:
        takes_launcher = "launcher" in inspect.signature(hook).parameters
    except (TypeError, ValueError):
        takes_launcher = False
    hook(config, launcher=launcher) if takes_launcher else hook(config)


def load_hook(task: TaskSpec, key: str):
    """The task's hook function (task.validate / task.preflight) loaded in this process, or None."""
    entry = getattr(task, key)
    if not entry:
        return None
    if task.cwd not in sys.path:
        sys.path.insert(0, task.cwd)  # the user's modules, as a run's process sees them
    module, _, attr = entry.partition(":")
    try:
        return load_entry(entry)
    except ValueError:  # the module imports; it has no such function
        raise UsageError(f"task.{key}={entry!r}: module {module} has no function {attr}") from None
    except Exception as e:  # noqa: BLE001 - whatever the import raised: one line naming the hook, as the probe does
        raise UsageError(
            f"task.{key}={entry!r}: module {module} does not import ({type(e).__name__}: {e})".splitlines()[0]
        ) from None
