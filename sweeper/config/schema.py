"""The typed schema of sweeper's own config groups: every key, default, type, comment and accepted range, once.

    python -m sweeper +experiment=rope --cfg            # the composed config: every key with its default
    register()                                          # ConfigStore: the groups below, every backend's launcher
    #                                                     schema and each `sweeper.schemas` entry point's groups

Structured configs (Hydra's ConfigStore) are the schema: `sweeper_schema` (package sweeper) and `task_schema`
(package task) are extended by conf/sweep.yaml; launcher/NAME is each registered backend's own schema
(sweeper.config.launchers); experiment.* is typed by sweeper.run.files.experiment.Experiment (the record the
manifest stores; sweeper.config.sweep.read_experiment builds it) and experiment.resources.* by ResourcesConf below.
Your own groups get typed the same way: a `sweeper.schemas` entry point (pyproject.toml) names a function called
with the ConfigStore before every composition (sweeper.train.config:register_schemas is the built-in trainer's).
Field helpers: sweeper.field_rules (declaring), sweeper.config.fields (building, checking).
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, List, Optional

from hydra.core.config_store import ConfigStore

from sweeper.config.decision import DecisionOptions
from sweeper.config.fields import show
from sweeper.config.launchers import registered
from sweeper.errors import UsageError
from sweeper.field_rules import MAX_RANKS, one_of, positive, rule
from sweeper.run.entry import ENTRY

ENTRY_POINTS = "sweeper.schemas"
PREFLIGHT_MODES = ("off", "warn", "stop")


# -- sweeper.*, task.*, experiment.resources.* ------------------------------------------------------------------

@dataclass
class AdaptiveConf:
    """sweeper.adaptive.* (with seeds=adaptive): looks at start, start+batch, ..., max_seeds seeds per arm."""
    start: int = rule(4, must="must be an integer >= 2 (seeds per arm at the first look)", ok=lambda v: v >= 2)
    batch: int = positive(2)        # seeds added per arm at each later look, to the comparisons still open
    max_seeds: int = positive(16)   # the most seeds per arm (the fixed design it is compared with)
    spending: str = one_of("hsd", ("obf", "pocock", "hsd"))   # alpha spending: Hwang-Shih-DeCani (gamma -6), O'Brien-Fleming, Pocock

    def check(self, prefix: str = "sweeper.adaptive") -> None:
        if self.max_seeds < self.start:
            raise UsageError(f"{prefix}.max_seeds={self.max_seeds}: must be at least {prefix}.start={self.start}")


@dataclass
class SweeperConf:
    """The `sweeper:` block of conf/sweep.yaml: how a sweep runs (what it runs is the experiment)."""
    dir: Optional[str] = None      # sweep directory; default sweeps/<experiment>-<hash of the config> (same command -> same dir)
    dry_run: bool = False          # print the plan and launch nothing
    extend: bool = False           # allow adding seeds to an existing sweep dir (finished runs are kept)
    reuse: bool = True             # reuse finished runs of earlier sweeps with the same identity (sweeper.store); false: train every run
    reuse_from: list[str] = field(default_factory=list)   # more folders of sweep dirs to reuse runs from (beside the sweep dir's own folder)
    preflight: str = one_of("off", PREFLIGHT_MODES)   # off | warn | stop: health checks once per variant before the seeds launch
    audit: bool = False            # run the resume audit on the baseline before launching
    report: bool = True            # write report.md, summary.csv and plots at the end
    tensorboard: bool = False      # run.log also writes TensorBoard event files (pip install 'seed-sweeper[tensorboard]')
    max_runs: int = positive(1000)  # the most runs one sweep may plan (sweeper.plan.make refuses a bigger plan before writing)
    one_change: str = one_of("warn", ("warn", "error", "off"))  # a variant with several declared changes: warn | error | off
    baseline_first: bool = True    # the baseline's health preflight (task.preflight) passes before any variant launches
    adaptive: AdaptiveConf = field(default_factory=AdaptiveConf)   # seeds=adaptive: looks, batch, max seeds
    decision: DecisionOptions = field(default_factory=DecisionOptions)   # alpha, min_seeds, n_resamples, seed: the report's and the adaptive looks' decision rule (sweeper.config.decision)
    determinism_probe: bool = False   # after the baseline ran, run one baseline seed again (SWEEP_DIR/probe/): the report compares it bitwise
    journal: Optional[str] = None  # experiment journal (DIR/journal.md + .jsonl); default beside the sweeps; 'off': none

    def __post_init__(self) -> None:
        if self.preflight in ("False", "false"):       # YAML's unquoted `off` is false
            self.preflight = "off"


MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")     # a dotted module name: my_pkg.model


def entry_point():
    return rule(None, must="expected an entry point package.module:function, e.g. sweeper.train:main",
                ok=lambda value: bool(ENTRY.match(value)))


@dataclass
class TaskConf:
    """The `task:` block: what every run starts (conf/task/train.yaml: the built-in trainer; task/custom: yours).
    Set exactly one of entry and command."""
    entry: Optional[str] = entry_point()      # package.module:function called with the run, by `python -m sweeper.run ENTRY RUN_DIR`
    command: Any = None                       # a program: [python, train.py] or 'python train.py --fast' (zero glue, or it calls sweeper.init())
    cwd: Optional[str] = None                 # where each run starts; default: the directory the sweep was started in
    validate: Optional[str] = entry_point()   # module:function called with each run's config before anything starts
    preflight: Optional[str] = entry_point()  # module:function(config) -> sweeper.health.HealthReport, for sweeper.preflight=warn|stop
    audit: Optional[str] = entry_point()      # module:function(run_config, work_dir, steps=, stop_at=, mode=, threads=, experiment=, variant=) -> a report with .identical and .format(): the resume audit (python -m sweeper.audit, sweeper.audit=true); ValueError for bad options
    preload: List[str] = rule(factory=list, must="must be a list of module names, e.g. [my_pkg.model, my_pkg.data]",
                              ok=lambda v: all(MODULE.match(m) for m in v))
    #                          what task.entry imports inside its function (or a python command beyond its script's
    #                          own imports): each slot's warm launcher imports them once, so the runs it forks do not
    #                          (the local pool; see sweeper/backends/local/warm.py)
    args: Any = "none"                        # what of the run config a task.command gets as arguments: none (only
    #                                           the {key} placeholders in its words) | flags (--key=value for every
    #                                           run-config key, nested keys dotted) | [seed, width, lr] (those keys)
    metrics: List[str] = field(default_factory=list)   # where a command without the run API reports final metrics:
    #                                           stdout (JSON lines) and/or files (.json/.jsonl/.csv, relative to
    #                                           {out_dir}); default: stdout, then any such file the run wrote in {out_dir}
    metrics_prefix: Optional[str] = None      # only stdout lines starting with this (e.g. 'METRICS ') hold metrics
    config_file: Optional[str] = None         # your script's own YAML (relative to cwd): its keys are the base of the
    #                                           run config (the experiment and variants override them); each run
    #                                           gets its merged copy at {config_file}: command: [python, train.py,
    #                                           --config, "{config_file}"] (sweeper/config/composition/task_base.py)

    def check(self, prefix: str = "task") -> None:
        self.args = check_args(self.args, f"{prefix}.args")
        if bool(self.entry) == bool(self.command):
            raise UsageError(f"{prefix}: set exactly one of {prefix}.entry (module:function, called with the run) and "
                             f"{prefix}.command (a program: your script as it is, or one that calls sweeper.init()); "
                             + ("both are set" if self.entry else "neither is set"))
        command = self.command
        if isinstance(command, str):
            try:
                command = shlex.split(command)
            except ValueError as e:
                raise UsageError(f"{prefix}.command={command!r}: {e}") from None
        if command is not None and not (isinstance(command, (list, tuple)) and command
                                        and all(isinstance(w, (str, int, float)) for w in command)):
            raise UsageError(f"{prefix}.command={command!r}: expected a program and its arguments, "
                             f"e.g. [python, train.py] or 'python train.py --fast'")
        self.command = [str(w) for w in command] if command is not None else None
        if self.preload and not (self.entry or self.command[0] in ("python", "python3")):
            raise UsageError(f"{prefix}.preload={show(list(self.preload))}: only with {prefix}.entry or a python "
                             f"{prefix}.command (another program starts fresh per run, which nothing can import "
                             f"for); remove {prefix}.preload")
        if (self.args != "none" or self.metrics or self.metrics_prefix or self.config_file) and not self.command:
            key = ("args" if self.args != "none" else "metrics" if self.metrics else "metrics_prefix"
                   if self.metrics_prefix else "config_file")
            raise UsageError(f"{prefix}.{key}: only with {prefix}.command (an entry gets the run itself)")
        bad = next((m for m in self.metrics if m != "stdout" and not m.endswith((".json", ".jsonl", ".csv"))), None)
        if bad is not None:
            raise UsageError(f"{prefix}.metrics={show(list(self.metrics))}: {bad!r} is not stdout or a .json, "
                             f".jsonl or .csv file")


ARGS_FORMS = ("none", "flags")


def check_args(value: Any, key: str = "task.args"):
    """task.args: none | flags | a list of run-config keys (dotted for nested keys)."""
    if isinstance(value, str) and value in ARGS_FORMS:
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(k, str) and re.fullmatch(r"[A-Za-z_][\w.-]*", k)
                                                           for k in value):
        return [str(k) for k in value]
    raise UsageError(f"{key}={show(value)}: accepted values are none (only the {{key}} placeholders of the command), "
                     f"flags (--key=value for every run-config key) or a list of run-config keys, e.g. [seed, lr]")


@dataclass
class ResourcesConf:
    """experiment.resources.VARIANT: what the launcher gives each run of that variant, instead of its default."""
    ranks_per_run: Optional[int] = rule(None, must=f"must be an integer from 1 to {MAX_RANKS} (processes per "
                                         f"run, one GPU each) or null", ok=lambda v: 1 <= v <= MAX_RANKS)


# -- registration -------------------------------------------------------------------------------------------------

def register() -> None:
    """Store every schema in Hydra's ConfigStore (idempotent): sweeper's own, then each `sweeper.schemas` entry
    point's register function called with the ConfigStore; one that fails is a UsageError naming it."""
    cs = ConfigStore.instance()
    cs.store(name="sweeper_schema", node=SweeperConf, package="sweeper", provider="sweeper")
    cs.store(name="task_schema", node=TaskConf, package="task", provider="sweeper")
    for name, backend in registered().items():
        cs.store(group="launcher", name=name, node=backend.schema, provider="sweeper")
    for ep in sorted(entry_points(group=ENTRY_POINTS), key=lambda ep: ep.name):
        try:
            ep.load()(cs)
        except Exception as e:  # noqa: BLE001 - a user's register function: one line naming it
            raise UsageError(f"config schema entry point {ENTRY_POINTS}:{ep.name} = {ep.value} failed: "
                             f"{type(e).__name__}: {e}".splitlines()[0]) from None

