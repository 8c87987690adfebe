"""Hydra composition of a sweep: the command line -> its task and one validated run config per variant.

    sweep = compose_sweep(["+experiment=rope", "seeds=0-3", "train.steps=100"])
    dirs, rest = split_config_dirs(["--config-dir", "conf", "+experiment=mine"])    # your own config dirs
    sweep = compose_sweep(with_config_dirs(rest, dirs))
    sweep.experiment.variants      # {"rope": [], "nope": ["model.pos_encoding=none"], ...}
    sweep.task                     # TaskSpec: what every run starts (conf/task/*.yaml or the experiment's task:)
    sweep.variant_configs["nope"]  # the run config (seed 0; the plan sets each run's seed)
    sweep.variant_seeds["nope"]    # that variant's own `seeds=` override parsed, or None (the sweep's seeds)

A run's config is every top-level key of the composed config except the sweeper's own (RESERVED), plus `seed`:
{seed, model, data, train, health} for the built-in trainer, whatever your experiment defines for your code.
Command-line overrides apply to every variant; a variant's own overrides are applied after them. The configs
ship inside the package (sweeper.conf, the repo's conf/); `--config-dir DIR` adds a directory to Hydra's search
path (as `hydra.searchpath=[file://DIR]` does). Every Hydra error, bad task, or value the task's validate hook
refuses becomes a one-line UsageError naming the override and what is accepted.
"""
from __future__ import annotations

import importlib.util
import os
import re
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweeper.errors import UsageError
from sweeper.run.rundir import Experiment
from sweeper.config.schema import ExperimentConf, SweeperConf, build, explain_validation, register, show
from sweeper.config.task import TaskCheck, TaskSpec, parse_task

RESERVED = ("sweeper", "launcher", "seeds", "experiment", "task", "hydra")   # never part of a run's config
CONFIG_DIR_FLAGS = ("--config-dir", "-cd")
MISSING = "???"


def _package_conf_dir() -> Path:
    """The configs shipped as the package `sweeper.conf` (the repo's conf/, mapped by pyproject.toml)."""
    spec = importlib.util.find_spec("sweeper.conf")
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0]).resolve()
    # A source checkout put on PYTHONPATH without installing it: its conf/ sits beside the package.
    return Path(importlib.util.find_spec("sweeper").origin).resolve().parent.parent / "conf"


CONF_DIR = _package_conf_dir()


@dataclass
class Sweep:
    overrides: list[str]
    cfg: dict                               # the composed config (command-line overrides, no variant)
    experiment: Experiment
    task: TaskSpec
    variant_configs: dict[str, dict] = field(default_factory=dict)   # variant -> run config (seed 0)
    variant_seeds: dict[str, list[int] | None] = field(default_factory=dict)  # variant -> its own seeds= or None
    changes: dict[str, list] = field(default_factory=dict)    # variant -> [config_diff.Declared] vs the baseline
    warnings: list[str] = field(default_factory=list)         # what the user should hear before launch

    @property
    def sweeper(self) -> dict:
        return self.cfg["sweeper"]

    @property
    def launcher(self) -> dict:
        return self.cfg["launcher"]


# -- config dirs ----------------------------------------------------------------------------------------------

def split_config_dirs(argv: list[str]) -> tuple[list[Path], list[str]]:
    """(absolute dirs of every `--config-dir DIR`, `-cd DIR`, `--config-dir=DIR`, the other arguments)."""
    dirs, rest, i = [], [], 0
    while i < len(argv):
        arg = argv[i]
        if arg in CONFIG_DIR_FLAGS:
            if i + 1 >= len(argv) or not argv[i + 1] or "=" in argv[i + 1] and not Path(argv[i + 1]).is_dir():
                raise UsageError(f"{arg} needs a directory: {arg} DIR (a folder with experiment/NAME.yaml)")
            value, i = argv[i + 1], i + 2
        elif arg.startswith("--config-dir="):
            value, i = arg.split("=", 1)[1], i + 1
        else:
            rest.append(arg)
            i += 1
            continue
        path = Path(value).expanduser().resolve()
        if not path.is_dir():
            raise UsageError(f"--config-dir {value}: no such directory ({path})")
        dirs.append(path)
    return dirs, rest


def with_config_dirs(overrides: list[str], dirs: list[Path]) -> list[str]:
    """The overrides with the dirs appended to Hydra's search path (merged with a given hydra.searchpath)."""
    if not dirs:
        return list(overrides)
    given = [o for o in overrides if _key(o) == "hydra.searchpath"]
    paths = [p for o in given for p in _searchpath_value(o)] + [f"file://{d}" for d in dirs]
    quoted = ",".join("'" + p.replace("\\", "\\\\").replace("'", "\\'") + "'" for p in paths)
    return [f"hydra.searchpath=[{quoted}]"] + [o for o in overrides if o not in given]


def _key(override: str) -> str:
    return override.split("=", 1)[0].strip().lstrip("+~")


def _searchpath_value(override: str) -> list[str]:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        value = OverridesParser.create().parse_overrides([override])[0].value()
    except Exception:  # noqa: BLE001 - Hydra's parser raises its own types; one line either way
        raise UsageError(f"malformed override {override!r}: expected hydra.searchpath=[file:///abs/dir,...]") from None
    return [str(v) for v in (value if isinstance(value, list) else [value])]


def search_dirs(overrides: list[str] = ()) -> list[Path]:
    """Every config directory composition searches: the package's, then each hydra.searchpath entry."""
    dirs = [CONF_DIR]
    for override in overrides:
        if _key(override) != "hydra.searchpath":
            continue
        for entry in _searchpath_value(override):
            scheme, sep, rest = entry.partition("://")
            if not sep:
                dirs.append(Path(entry).expanduser().resolve())
            elif scheme == "file":
                dirs.append(Path(rest).expanduser().resolve())
            elif scheme == "pkg":
                spec = importlib.util.find_spec(rest) if _importable(rest) else None
                if spec is not None and spec.submodule_search_locations:
                    dirs.append(Path(list(spec.submodule_search_locations)[0]))
    return dirs


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def available(group: str, overrides: list[str] = ()) -> list[str]:
    """The options of a config group over every config dir and the ConfigStore (the typed groups)."""
    from hydra.core.config_store import ConfigStore

    try:
        register()
        stored = {name.removesuffix(".yaml") for name in ConfigStore.instance().list(group)}
    except (UsageError, OSError, ValueError):   # ValueError-like: no such group in the store
        stored = set()
    return sorted(stored | {p.stem for d in search_dirs(overrides) for p in (d / group).glob("*.yaml")})


def _where(overrides: list[str]) -> str:
    dirs = search_dirs(overrides)
    if len(dirs) == 1:
        return f"searched {dirs[0]}; add your own with --config-dir DIR"
    return "searched " + ", ".join(map(str, dirs))


# -- composition ----------------------------------------------------------------------------------------------

def compose(overrides: list[str]) -> dict:
    """Compose sweep.yaml with overrides into a plain dict (interpolations resolved; `???` values kept)."""
    overrides = comma_lists(overrides)
    try:
        return _compose(overrides)
    except UsageError:
        raise
    except Exception as e:  # Hydra raises several types; each becomes one line
        raise UsageError(explain_hydra_error(e, overrides)) from None


def _compose(overrides: list[str]) -> dict:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    if not (CONF_DIR / "sweep.yaml").is_file():
        raise UsageError(f"sweeper's configs are not installed ({CONF_DIR / 'sweep.yaml'} is missing); "
                         f"reinstall sweeper (pip install .)")
    register()                                   # the structured configs (schemas) of every typed group
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(str(CONF_DIR), version_base=None), _strict_boolean_nodes():
            cfg = hydra_compose("sweep", overrides=list(overrides))
        _strict_booleans(cfg, overrides)
        return OmegaConf.to_container(cfg, resolve=True)
    finally:
        GlobalHydra.instance().clear()


def comma_lists(overrides: list[str]) -> list[str]:
    """The shell-friendly list forms LocalLauncherConf.from_dict takes, as Hydra lists: `launcher.devices=3,5`
    (Hydra would read a sweep), `launcher.cores='0,1'` and `launcher.devices=3` become [3,5], [0,1], [3]."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep

    from sweeper.config.launcher_schema import PoolConf

    keys, out = {f"launcher.{k}" for k in PoolConf.COMMA_LISTS}, []
    for override in overrides:
        if _key(override) in keys and "=" in override and not override.startswith("~"):
            try:
                value = OverridesParser.create().parse_overrides([override])[0].value()
            except Exception:  # noqa: BLE001 - Hydra reports it when composing
                value = None
            if isinstance(value, ChoiceSweep) and value.simple_form:
                items = value.list
            elif isinstance(value, str):
                items = [p.strip() for p in value.split(",") if p.strip()]
            else:
                items = [value] if isinstance(value, int) and not isinstance(value, bool) else None
            if items is not None and all(isinstance(i, (int, str)) and not isinstance(i, bool) for i in items):
                written = [str(i) if isinstance(i, int) else "'" + i.replace("\\", "\\\\").replace("'", "\\'") + "'"
                           for i in items]
                override = f"{override.split('=', 1)[0]}=[{','.join(written)}]"
        out.append(override)
    return out


def explain_hydra_error(e: Exception, overrides: list[str]) -> str:
    msg, name = str(e), type(e).__name__
    m = re.match(r"Ambiguous value for argument '([^'=]+)=([^\n]*)'", msg)
    if m:
        key, value = m.groups()
        return (f"{key}={value}: a comma-separated value is a Hydra sweep, which python -m sweeper does not run "
                f"(variants go in the experiment); write a list as {key}=[{value}] or a string as {key}='{value}'")
    cause = _omegaconf_cause(e)
    if cause is not None:
        line = explain_validation(cause, value_of=lambda key: _override_value(key, overrides))
        key = str(getattr(cause, "full_key", "") or "")
        given = {_key(o) for o in overrides}
        refused, typed = getattr(cause, "value", None), _override_value(key, overrides)
        from_file = key in given and (type(refused) is not type(typed) or refused != typed)   # 1 == True
        return f"{line} (set in a config file)" if from_file or re.sub(r"\[\d+\]$", "", key) not in given else line
    m = re.search(r"Could not find '([^']+)/([^'/]+)'", msg)
    if m:
        group, option = m.groups()
        group = group.strip("/")
        listed = re.search(r"Available options in '[^']*':\n((?:\t.*\n?)*)", msg)
        options = [o.strip() for o in listed.group(1).splitlines() if o.strip()] if listed \
            else available(group, overrides)
        what = "experiments" if group == "experiment" else f"{group} configs"
        kind = "experiment" if group == "experiment" else group
        return (f"unknown {kind} '{option}': available {what} are {', '.join(options) or 'none'} "
                f"({_where(overrides)})")
    m = re.search(r"Could not override '([^']+)'", msg)
    if m:
        key = m.group(1)
        if key == "experiment":
            return (f"experiment is added with a plus: +experiment=NAME (available: "
                    f"{', '.join(available('experiment', overrides))})")
        parent = key.rsplit(".", 1)[0] if "." in key else None
        keys = _keys_at(parent, [o for o in overrides if _key(o) != key])
        where = f"keys of {parent}" if parent else "top-level keys"
        return f"unknown config key '{key}'; {where} are: {', '.join(keys)}" if keys else f"unknown config key '{key}'"
    if name == "OverrideParseException":
        bad = next((o for o in overrides if o.split("=")[0].strip() and o in msg), None)
        bad = bad or re.search(r"override '([^']*)'", msg)
        bad = bad.group(1) if isinstance(bad, re.Match) else bad
        return f"malformed override {bad!r}: expected key=value (e.g. train.steps=100, seeds=[0,2,5])" if bad \
            else f"malformed override: expected key=value; {msg.splitlines()[0]}"
    if "mandatory value" in msg.lower() or "MissingMandatoryValue" in name:
        m = re.search(r"full_key: (\S+)", msg)
        return _missing_message(m.group(1) if m else "a required key")
    return msg.strip().splitlines()[0] if msg.strip() else name


def _omegaconf_cause(e: BaseException):
    """The OmegaConf type or key error behind a Hydra error (a value merged into a structured config), if any."""
    from omegaconf.errors import ConfigKeyError, ConfigTypeError, ValidationError

    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, (ValidationError, ConfigKeyError, ConfigTypeError)) and getattr(e, "full_key", None):
            return e
        e, seen = e.__cause__ or e.__context__, seen + 1
    return None


def _override_value(key: str, overrides: list[str]) -> Any:
    """The value the last override of `key` gives (as Hydra parses it), or None."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    for override in reversed(overrides):
        if _key(override) == key:
            try:
                return OverridesParser.create().parse_overrides([override])[0].value()
            except Exception:  # noqa: BLE001 - only shown in a message
                return None
    return None


@contextmanager
def _strict_boolean_nodes():
    """While composing, a typed boolean takes true or false only, from a YAML file too (OmegaConf would turn
    `yes`, `on`, `1` into true); OmegaConf has no option for it, so its BooleanNode conversion is narrowed here
    (and put back). Without that hook (another OmegaConf) the command line is still checked by _strict_booleans."""
    from omegaconf.errors import ValidationError
    from omegaconf.nodes import BooleanNode

    convert = getattr(BooleanNode, "_validate_and_convert_impl", None)
    if convert is None:
        yield
        return

    def strict(self, value: Any) -> bool:
        if not isinstance(value, bool):
            raise ValidationError("expected a boolean (true or false)")
        return value

    BooleanNode._validate_and_convert_impl = strict
    try:
        yield
    finally:
        BooleanNode._validate_and_convert_impl = convert


def _strict_booleans(cfg: Any, overrides: list[str]) -> None:
    """A typed boolean takes true or false only (OmegaConf would also turn `yes`, `1`, `2` into a boolean)."""
    from omegaconf import OmegaConf
    from omegaconf.nodes import BooleanNode

    for override in overrides:
        key = _key(override)
        if "=" not in override or override.startswith("~") or key.startswith("hydra"):
            continue
        section, _, leaf = key.rpartition(".")
        parent = OmegaConf.select(cfg, section, default=None) if section else cfg
        node = parent._get_node(leaf) if OmegaConf.is_dict(parent) else None
        value = _override_value(key, [override])
        if isinstance(node, BooleanNode) and value is not None and not isinstance(value, bool):
            raise UsageError(f"{key}={show(value)}: expected a boolean (true or false)")


def _keys_at(section: str | None, overrides: list[str]) -> list[str]:
    """The keys a config section has once composed without the offending override ([] if that fails too)."""
    try:
        node: Any = _compose(overrides)
    except Exception:  # noqa: BLE001 - only a hint for an error message
        return []
    for part in section.split(".") if section else []:
        node = node.get(part) if isinstance(node, dict) else None
    return sorted(k for k in node if not (section is None and k == "hydra")) if isinstance(node, dict) else []


def _missing_message(key: str) -> str:
    return f"{key} is required (it is ??? in the config): set it on the command line, e.g. {key}=VALUE"


def _missing_keys(node: Any, prefix: str = "") -> list[str]:
    if isinstance(node, dict):
        return [k for key, v in node.items() for k in _missing_keys(v, f"{prefix}{key}.")]
    if isinstance(node, list):
        return [k for i, v in enumerate(node) for k in _missing_keys(v, f"{prefix}{i}.")]
    return [prefix[:-1]] if node == MISSING else []


def _experiment_file(overrides: list[str]) -> str:
    name = next((o.split("=", 1)[1] for o in reversed(overrides) if _key(o) == "experiment" and "=" in o), None)
    for d in search_dirs(overrides) if name else []:
        if (d / "experiment" / f"{name}.yaml").is_file():
            return str(d / "experiment" / f"{name}.yaml")
    return f"experiment/{name}.yaml"


def read_experiment(cfg: dict, overrides: list[str] = ()) -> Experiment:
    """The composed experiment.* typed by its schema (sweeper.config.schema.ExperimentConf); errors name the file."""
    exp = cfg.get("experiment")
    if not exp:
        raise UsageError("no experiment given: add +experiment=NAME (available: "
                         + ", ".join(available("experiment", overrides)) + f"; {_where(overrides)})")
    where = _experiment_file(overrides)
    if not isinstance(exp, dict):
        raise UsageError(f"experiment={exp!r}: an experiment is a mapping (name, baseline, metric, "
                         f"lower_is_better, variants) in {where}")
    for key in ("name", "baseline", "metric", "lower_is_better", "variants"):
        if key not in exp:
            raise UsageError(f"experiment.{key} is missing in {where}")
    variants = exp["variants"] or {}
    if not isinstance(variants, dict) or not variants:
        raise UsageError("experiment.variants must map variant names to lists of overrides")
    for vname, ovs in variants.items():
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(vname)):
            raise UsageError(f"variant name {vname!r}: use letters, digits, '_', '-' and '.' only")
        if ovs is not None and not (isinstance(ovs, list) and all(isinstance(o, str) for o in ovs)):
            raise UsageError(f"experiment.variants.{vname} must be a list of 'key=value' overrides")
    try:
        conf = build(ExperimentConf, exp, "experiment")
    except UsageError as e:
        raise UsageError(f"{e} (in {where})") from None
    if conf.baseline not in conf.variants:
        raise UsageError(f"experiment.baseline={conf.baseline!r} is not one of the variants: "
                         f"{', '.join(conf.variants)}")
    dropped = {_key(o).removeprefix("experiment.variants.") for o in overrides
               if o.startswith("~experiment.variants.")}       # a dropped variant takes its notes along
    return Experiment(name=conf.name, baseline=conf.baseline, metric=conf.metric,
                      lower_is_better=conf.lower_is_better,
                      variants={str(k): list(v or []) for k, v in conf.variants.items()},
                      min_effect=conf.min_effect, secondary_metrics=dict(conf.secondary_metrics),
                      hypothesis=conf.hypothesis,
                      notes={str(k): str(v) for k, v in conf.notes.items() if k not in dropped},
                      controls=[str(v) for v in conf.controls if v not in dropped],
                      bundles=[str(v) for v in conf.bundles if v not in dropped], design=conf.design)


def check_schemas(cfg: dict) -> None:
    """The ranges of sweeper.* and launcher.* (their schema's rules, before anything starts); cfg["sweeper"]
    becomes the checked block (`preflight: false` reads as off). task.* is checked by read_task."""
    from dataclasses import asdict

    from sweeper.config.launcher_schema import launcher_conf

    cfg["sweeper"] = asdict(build(SweeperConf, cfg.get("sweeper"), "sweeper"))
    launcher_conf(cfg.get("launcher"))


def run_config(cfg: dict, seed: int = 0) -> dict:
    """A run's config: every top-level key of the composed config but the sweeper's own, and `seed`."""
    return {"seed": seed, **{k: v for k, v in cfg.items() if k not in RESERVED and k != "seed"}}


def read_task(cfg: dict, cwd: str | Path | None = None) -> TaskSpec:
    """The composed `task:` block; a relative task.cwd is relative to `cwd` (default: this process's cwd)."""
    return parse_task(cfg.get("task"), cwd=cwd or os.getcwd())


def compose_sweep(overrides: list[str]) -> Sweep:
    """Compose the sweep and every variant, check the task and validate each run config through the task's
    validate hook; raises UsageError before anything is started or written."""
    cfg = compose(overrides)
    check_schemas(cfg)
    experiment = read_experiment(cfg, overrides)
    task = read_task(cfg)
    sweeper_cfg = cfg.get("sweeper") or {}
    with TaskCheck(task, preflight=sweeper_cfg.get("preflight") not in (None, False, "off")
                   or (sweeper_cfg.get("baseline_first", True) and len(experiment.variants) > 1)) as check:
        try:                                          # the task's import probe runs while the variants compose
            sweep = _compose_variants(cfg, overrides, experiment, task)
        except UsageError:
            check.wait()                              # a task that cannot start is named first, as ever
            raise
        check.wait()
    _validate(sweep)
    return sweep


def _compose_variants(cfg: dict, overrides: list[str], experiment: Experiment, task: TaskSpec) -> Sweep:
    """Every variant's run config and seeds, and the ablation check: nothing started, nothing written."""
    sweep = Sweep(overrides=list(overrides), cfg=cfg, experiment=experiment, task=task)
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
    from sweeper.config.ablation import check_ablation

    sweep.changes, sweep.warnings = check_ablation(sweep, compose)
    return sweep


def _variant_seeds(name: str, variant: str, overrides: list[str], vcfg: dict) -> list[int] | None:
    """A variant's own `seeds=` override, parsed (None when it has none: it runs the sweep's seeds)."""
    from sweeper.config.seeds import parse_seeds

    from sweeper.plan.make import DEFAULT_MAX_RUNS, count_seeds

    if not any(_key(o) == "seeds" for o in overrides):
        return None
    try:
        n, limit = count_seeds(vcfg.get("seeds")), (vcfg.get("sweeper") or {}).get("max_runs", DEFAULT_MAX_RUNS)
        if isinstance(limit, int) and n > limit:      # counted, never expanded (seeds=0-10**12 stays cheap)
            raise UsageError(f"seeds={vcfg.get('seeds')} plans {n} runs, more than sweeper.max_runs={limit}; ask "
                             f"for fewer seeds, or raise the limit with sweeper.max_runs={n}")
        return parse_seeds(vcfg.get("seeds"))
    except UsageError as e:
        raise UsageError(f"experiment {name}, variant {variant}: {e}") from None


def _validate(sweep: Sweep) -> None:
    """Each variant's run config: no `???` left, and accepted by the task's validate hook. An error every
    variant shares (a command-line value) is reported once, without a variant name."""
    hook = load_hook(sweep.task, "validate")
    errors: dict[str, str] = {}
    for variant, config in sweep.variant_configs.items():
        missing = _missing_keys(config)
        if missing:
            errors[variant] = _missing_message(missing[0])
        elif hook is not None:
            try:
                _call_validate(hook, dict(config), dict(sweep.launcher))
            except ValueError as e:                     # ConfigError and UsageError are ValueErrors
                errors[variant] = (str(e).strip().splitlines() or [type(e).__name__])[0]
            except Exception as e:  # noqa: BLE001 - a bug in the hook: still one line before anything starts
                errors[variant] = (f"task.validate={sweep.task.validate} raised {type(e).__name__}: {e}"
                                   .splitlines()[0])
    if not errors:
        return
    variant, message = next(iter(errors.items()))
    if len(errors) == len(sweep.variant_configs) and len(set(errors.values())) == 1:
        raise UsageError(message)
    raise UsageError(f"variant {variant}: {message}")


def _call_validate(hook, config: dict, launcher: dict) -> None:
    """task.validate(config), or validate(config, launcher=...) when the hook takes a `launcher` argument (to
    check what depends on where runs start, e.g. a GPU the local launcher must offer)."""
    import inspect

    try:
        takes_launcher = "launcher" in inspect.signature(hook).parameters
    except (TypeError, ValueError):
        takes_launcher = False
    hook(config, launcher=launcher) if takes_launcher else hook(config)


def load_hook(task: TaskSpec, key: str):
    """The task's hook function (task.validate / task.preflight) loaded in this process, or None."""
    from sweeper.run.entry import load_entry

    entry = getattr(task, key)
    if not entry:
        return None
    if task.cwd not in sys.path:
        sys.path.insert(0, task.cwd)                # the user's modules, as a run's process sees them
    try:
        return load_entry(entry)
    except Exception as e:  # noqa: BLE001 - whatever the import raised: one line naming the hook
        raise UsageError(f"task.{key}={entry!r} does not load: {type(e).__name__}: {e}".splitlines()[0]) from None


def to_yaml(obj: Any) -> str:
    import yaml

    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)
