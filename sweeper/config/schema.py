"""The typed schema of sweeper's own config groups: every key, default, type, comment and accepted range, once.

    python -m sweeper +experiment=rope --cfg            # the composed config: every key with its default
    register()                                          # ConfigStore: the groups below + each `sweeper.schemas` entry point
    cfg = build(SweeperConf, {"dry_run": True}, "sweeper")   # typed and checked; UsageError naming the key

Structured configs (Hydra's ConfigStore) are the schema: `sweeper_schema` (package sweeper) and `task_schema`
(package task) are extended by conf/sweep.yaml; launcher/local and launcher/slurm are the group options
themselves (sweeper.config.launcher_schema); experiment.* is applied by compose.read_experiment. A field made with
`rule(...)` carries its accepted range: the same words for a wrong type and an out-of-range value. Your own
groups get typed the same way: a `sweeper.schemas` entry point (pyproject.toml) names a function called with
the ConfigStore before every composition (sweeper.train.config:register_schemas is the built-in trainer's).
"""
from __future__ import annotations

import re
import shlex
import typing
from dataclasses import MISSING as NO_DEFAULT
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Callable, Dict, List, Optional

from sweeper.errors import UsageError

MISSING = "???"                                   # OmegaConf's mandatory value
ENTRY_POINTS = "sweeper.schemas"
PREFLIGHT_MODES = ("off", "warn", "stop")
DIRECTIONS = ("lower", "higher")


# -- fields with their accepted range -------------------------------------------------------------------------

def rule(default: Any = NO_DEFAULT, *, must: str, ok: Callable[[Any], bool], factory: Any = NO_DEFAULT):
    """A field whose value must pass ok(value) (None passes when the type is Optional); `must` says what is
    accepted and ends every error about the key: `launcher.max_parallel=0: must be a positive integer or null`."""
    return field(default=default, default_factory=factory, metadata={"must": must, "ok": ok})


def positive(default: Any, null: bool = False, what: str = "integer"):
    return rule(default, must=f"must be a positive {what}{' or null' if null else ''}", ok=lambda v: v > 0)


def at_least_zero(default: Any, null: bool = False, what: str = "an integer >= 0"):
    return rule(default, must=f"must be {what}{' or null' if null else ''}", ok=lambda v: v >= 0)


def one_of(default: str, accepted: tuple[str, ...]):
    return rule(default, must=f"accepted values are {', '.join(accepted)}", ok=lambda v: v in accepted)


def check_fields(obj: Any, prefix: str, given: dict | None = None) -> None:
    """Every rule(...) field of a built dataclass (the error shows the value as given, when known)."""
    for f in fields(obj):
        value, ok = getattr(obj, f.name), f.metadata.get("ok")
        if ok is not None and value is not None and not ok(value):
            shown = (given or {}).get(f.name, value)
            raise UsageError(f"{prefix}.{f.name}={show(shown)}: {f.metadata['must']}")


def phrase_of(cls: type, key: str) -> str:
    """What a field accepts: its rule's words, or its type's (`expected an integer or null`)."""
    spec = next(f for f in fields(cls) if f.name == key)
    return spec.metadata.get("must") or f"expected {describe(type_hints(cls)[key])}"


def _container(hint: Any) -> type | tuple | None:
    args = [a for a in typing.get_args(hint) if a is not type(None)] if _is_union(hint) else [hint]
    origin = typing.get_origin(args[0]) if len(args) == 1 else None
    if origin in (dict, Dict) or (len(args) == 1 and is_dataclass(args[0])):
        return dict
    return (list, tuple) if origin in (list, List) else None


def _element(hint: Any) -> type | None:
    """The scalar element type of a List[...] field (Optional allowed), else None."""
    args = [a for a in typing.get_args(hint) if a is not type(None)] if _is_union(hint) else [hint]
    if len(args) != 1 or typing.get_origin(args[0]) not in (list, List):
        return None
    inner = typing.get_args(args[0])
    return inner[0] if inner and inner[0] in (bool, int, float, str) else None


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) is typing.Union or type(hint).__name__ == "UnionType"


def build(cls: type, values: Any, prefix: str, label: str = ""):
    """values (a mapping: a composed block, an old manifest's dict, plugin options) as a checked `cls`: unknown
    keys, wrong types and out-of-range values are one-line UsageErrors naming `prefix.key`."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise UsageError(f"{prefix}={values!r}: expected a mapping with keys {', '.join(keys_of(cls))}")
    unknown = sorted(set(values) - set(keys_of(cls)))
    if unknown:
        raise UsageError(unknown_key(f"{prefix}.{unknown[0]}", keys_of(cls), label))
    hints = type_hints(cls)
    for key, value in values.items():          # a container of the wrong kind: OmegaConf names no key for it
        kind = _container(hints[key])
        if value is not None and kind and not isinstance(value, kind):
            raise UsageError(f"{prefix}.{key}={show(value)}: {phrase_of(cls, key)}")
        if value is not None and hints[key] in (bool, Optional[bool]) and not isinstance(value, bool):
            raise UsageError(f"{prefix}.{key}={show(value)}: {phrase_of(cls, key)}")   # OmegaConf: 1, 'yes' -> true
    try:
        obj = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls), values))
    except OmegaConfBaseException as e:
        raise UsageError(explain_validation(e, prefix, lambda key: values.get(key.split(".")[0]))) from None
    for key, value in values.items():          # OmegaConf lets a nested list or mapping into a List[int]
        element = _element(hints[key])
        items = getattr(obj, key)
        if element and isinstance(items, (list, tuple)) and not all(
                isinstance(v, element) and not (isinstance(v, bool) and element is not bool) for v in items):
            raise UsageError(f"{prefix}.{key}={show(value)}: {phrase_of(cls, key)}")
    check_fields(obj, prefix, values)
    if hasattr(obj, "check"):
        obj.check(prefix)
    return obj


def keys_of(cls: type) -> list[str]:
    return [f.name for f in fields(cls)]


def unknown_key(key: str, keys: list[str], label: str = "") -> str:
    parent = key.rsplit(".", 1)[0] if "." in key else None
    where = f"keys of {parent}{label}" if parent else "top-level keys"
    return f"unknown config key '{key}'; {where} are: {', '.join(sorted(keys))}" if keys else \
        f"unknown config key '{key}'"


# -- one line for an OmegaConf type or key error ----------------------------------------------------------------

def explain_validation(e: Exception, prefix: str = "", value_of: Callable[[str], Any] | None = None) -> str:
    """`train.steps='abc': expected an integer` from an OmegaConf ValidationError / ConfigKeyError (raised while
    merging into a structured config). value_of(key) gives the value as written (a list for a list element)."""
    key = str(getattr(e, "full_key", "") or "")
    base = re.sub(r"\[\d+\]$", "", key)                       # an element of a list: name the list
    full = ".".join(p for p in (prefix, base) if p)
    owner, name = getattr(e, "object_type", None), getattr(e, "key", None)
    if not (is_dataclass(owner) and isinstance(name, str) and base == key):
        owner, name = _owning_dataclass(getattr(e, "parent_node", None), base.rpartition(".")[2])
    if owner is not None:
        known = keys_of(owner)
        if name not in known:
            return unknown_key(full, known)
        phrase = phrase_of(owner, name)
    else:
        ref, first = getattr(e, "ref_type", None), (str(e).strip().splitlines() or [type(e).__name__])[0]
        kinds = {"Cannot merge DictConfig with ListConfig": "expected a mapping",
                 "Cannot merge ListConfig with DictConfig": "expected a list"}
        phrase = f"expected {describe(ref)}" if ref not in (None, Any) else kinds.get(first, first)
    shown = getattr(e, "value", None) if base == key else None    # the value refused, wherever it was set
    if shown is None and value_of:
        shown = value_of(base)                                    # a list as written, for one of its elements
    return f"{full}={show(shown)}: {phrase}"


def _owning_dataclass(node: Any, name: str) -> tuple[type | None, str]:
    """The structured config (dataclass) above an OmegaConf node that has a field `name` (a list's field)."""
    for _ in range(8):
        if node is None:
            break
        owner = getattr(getattr(node, "_metadata", None), "object_type", None)
        if is_dataclass(owner) and name in keys_of(owner):
            return owner, name
        node = node._get_parent()
    return None, name


def show(value: Any) -> str:
    """A value as it is written in a config: null, true, 'text', [1, 2]."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return repr(value)


def type_hints(cls: type) -> dict:
    import sys

    return typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))


def describe(hint: Any) -> str:
    """What a type annotation accepts, in words: Optional[List[int]] -> 'a list of integers or null'."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if _is_union(hint):
        rest = [a for a in args if a is not type(None)]
        inner = describe(rest[0]) if len(rest) == 1 else " or ".join(describe(a) for a in rest)
        return inner + (" or null" if len(rest) < len(args) else "")
    if origin in (list, List):
        return f"a list of {_plural(args[0] if args else Any)}"
    if origin in (dict, Dict):
        return f"a mapping of names to {_plural(args[1] if len(args) > 1 else Any)}"
    if is_dataclass(hint):
        return f"a mapping with keys {', '.join(keys_of(hint))}"
    return {bool: "a boolean (true or false)", int: "an integer", float: "a number", str: "a string"}.get(
        hint, "a value")


def _plural(hint: Any) -> str:
    words = {bool: "booleans", int: "integers", float: "numbers", str: "strings"}
    if hint in words:
        return words[hint]
    if typing.get_origin(hint) in (list, List):
        return "lists"
    return "values" if hint is Any else describe(hint).removeprefix("a ").removeprefix("an ") + "s"


# -- sweeper.*, task.*, experiment.* ----------------------------------------------------------------------------

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
    preflight: str = one_of("off", PREFLIGHT_MODES)   # off | warn | stop: health checks once per variant before the seeds launch
    audit: bool = False            # run the resume audit on the baseline before launching
    report: bool = True            # write report.md, summary.csv and plots at the end
    tensorboard: bool = False      # run.log also writes TensorBoard event files (pip install 'seed-sweeper[tensorboard]')
    max_runs: int = positive(1000)  # the most runs one sweep may plan (sweeper.plan.make refuses a bigger plan before writing)
    one_change: str = one_of("warn", ("warn", "error", "off"))  # a variant with several declared changes: warn | error | off
    baseline_first: bool = True    # the baseline's health preflight (task.preflight) passes before any variant launches
    adaptive: AdaptiveConf = field(default_factory=AdaptiveConf)   # seeds=adaptive: looks, batch, max seeds
    journal: Optional[str] = None  # experiment journal (DIR/journal.md + .jsonl); default beside the sweeps; 'off': none

    def __post_init__(self) -> None:
        if self.preflight in ("False", "false"):       # YAML's unquoted `off` is false
            self.preflight = "off"


MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")     # a dotted module name: my_pkg.model


def entry_point():
    def ok(value: str) -> bool:
        from sweeper.run.entry import ENTRY

        return bool(ENTRY.match(value))

    return rule(None, must="expected an entry point package.module:function, e.g. sweeper.train:main", ok=ok)


@dataclass
class TaskConf:
    """The `task:` block: what every run starts (conf/task/train.yaml: the built-in trainer; task/custom: yours).
    Set exactly one of entry and command."""
    entry: Optional[str] = entry_point()      # package.module:function called with the run, by `python -m sweeper.run ENTRY RUN_DIR`
    command: Any = None                       # a program: [python, train.py] or 'python train.py --fast' (zero glue, or it calls sweeper.init())
    cwd: Optional[str] = None                 # where each run starts; default: the directory the sweep was started in
    validate: Optional[str] = entry_point()   # module:function called with each run's config before anything starts
    preflight: Optional[str] = entry_point()  # module:function(config) -> sweeper.health.HealthReport, for sweeper.preflight=warn|stop
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
        if (self.args != "none" or self.metrics or self.metrics_prefix) and not self.command:
            key = "args" if self.args != "none" else "metrics" if self.metrics else "metrics_prefix"
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
class ExperimentConf:
    """experiment.* (conf/experiment/NAME.yaml, added with +experiment=NAME): what a sweep decides."""
    name: str = rule(MISSING, must="must be a name of letters, digits, '_', '-' and '.'",
                     ok=lambda v: bool(re.fullmatch(r"[A-Za-z0-9_.-]+", v)))   # names the sweep dir: sweeps/<name>-<hash>
    baseline: str = MISSING                  # the variant every other variant is compared with
    metric: str = rule(MISSING, must="must be a metric name", ok=bool)   # the decision metric: a key of each run's final metrics
    lower_is_better: bool = MISSING          # the metric's direction
    variants: Dict[str, Optional[List[str]]] = MISSING   # variant name -> overrides (command-line syntax); null = []
    min_effect: Optional[float] = positive(None, null=True, what="number (the smallest effect that matters, in "
                                                                "metric units)")
    secondary_metrics: Dict[str, str] = rule(factory=dict, must="must map metric names to lower or higher (which "
                                             "direction is better)", ok=lambda d: all(v in DIRECTIONS
                                                                                      for v in d.values()))
    hypothesis: Optional[str] = None         # what the sweep tests, in a sentence (the journal's headline)
    notes: Dict[str, str] = field(default_factory=dict)   # variant -> one line: what it tests
    controls: List[str] = field(default_factory=list)     # variants meant to equal another (deliberate A/A controls)
    bundles: List[str] = field(default_factory=list)      # variants that change several things on purpose
    design: str = one_of("auto", ("auto", "paired", "independent"))   # paired test by seed or Welch: auto decides
    #   from what the runs recorded (the same data order per seed: the built-in trainer's hashes, or run.generator
    #   ("data_order") of the run API); paired: the experiment declares that a seed fixes the shared randomness


# -- registration -------------------------------------------------------------------------------------------------

def register() -> None:
    """Store every schema in Hydra's ConfigStore (idempotent): sweeper's own, then each `sweeper.schemas` entry
    point's register function called with the ConfigStore; one that fails is a UsageError naming it."""
    from importlib.metadata import entry_points

    from hydra.core.config_store import ConfigStore

    from sweeper.config.launcher_schema import LocalLauncherConf, SlurmLauncherConf

    cs = ConfigStore.instance()
    cs.store(name="sweeper_schema", node=SweeperConf, package="sweeper", provider="sweeper")
    cs.store(name="task_schema", node=TaskConf, package="task", provider="sweeper")
    cs.store(group="launcher", name="local", node=LocalLauncherConf, provider="sweeper")
    cs.store(group="launcher", name="slurm", node=SlurmLauncherConf, provider="sweeper")
    for ep in sorted(entry_points(group=ENTRY_POINTS), key=lambda ep: ep.name):
        try:
            ep.load()(cs)
        except Exception as e:  # noqa: BLE001 - a user's register function: one line naming it
            raise UsageError(f"config schema entry point {ENTRY_POINTS}:{ep.name} = {ep.value} failed: "
                             f"{type(e).__name__}: {e}".splitlines()[0]) from None

