"""Hydra composition of a sweep: the command line -> one validated run config per variant.

    sweep = compose_sweep(["+experiment=rope", "seeds=0-3", "train.steps=100"])
    sweep.experiment.variants   # {"rope": [...], "nope": ["model.pos_encoding=none"], ...}
    sweep.variant_configs["nope"]  # the run config mapping (seed filled in per run by the plan)

Command-line overrides apply to every variant; a variant's own overrides are applied after them.
Every Hydra error becomes a one-line UsageError naming the override and what is accepted.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweeper.errors import UsageError

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
RUN_SECTIONS = ("model", "data", "train", "health")


@dataclass(frozen=True)
class Experiment:
    name: str
    baseline: str
    metric: str
    lower_is_better: bool
    variants: dict[str, list[str]]

    def to_dict(self) -> dict:
        return {"name": self.name, "baseline": self.baseline, "metric": self.metric,
                "lower_is_better": self.lower_is_better, "variants": list(self.variants)}


@dataclass
class Sweep:
    overrides: list[str]
    cfg: dict                               # the composed config (command-line overrides, no variant)
    experiment: Experiment
    variant_configs: dict[str, dict] = field(default_factory=dict)   # variant -> run config (seed 0)

    @property
    def sweeper(self) -> dict:
        return self.cfg["sweeper"]

    @property
    def launcher(self) -> dict:
        return self.cfg["launcher"]


def available(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def compose(overrides: list[str]) -> dict:
    """Compose conf/sweep.yaml with overrides into a plain dict (interpolations resolved)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(str(CONF_DIR), version_base=None):
            cfg = hydra_compose("sweep", overrides=list(overrides))
        return OmegaConf.to_container(cfg, resolve=True)
    except Exception as e:  # Hydra raises several types; each becomes one line
        raise UsageError(explain_hydra_error(e, overrides)) from None
    finally:
        GlobalHydra.instance().clear()


def explain_hydra_error(e: Exception, overrides: list[str]) -> str:
    msg, name = str(e), type(e).__name__
    m = re.search(r"Could not find '([^/']+)/([^']+)'", msg)
    if m:
        group, option = m.groups()
        if group == "experiment":
            return f"unknown experiment '{option}': available experiments are {', '.join(available(group))}"
        return f"unknown {group} '{option}': available {group} configs are {', '.join(available(group))}"
    m = re.search(r"Could not override '([^']+)'", msg)
    if m:
        key = m.group(1)
        if key == "experiment":
            return "experiment is added with a plus: +experiment=NAME (available: " + ", ".join(available("experiment")) + ")"
        parent = key.rsplit(".", 1)[0] if "." in key else None
        keys = _group_keys(parent, overrides) if parent else ["model", "data", "train", "health", "launcher", "seeds", "sweeper"]
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
        return f"missing value for {m.group(1) if m else 'a required key'}: set it on the command line"
    return msg.splitlines()[0] if msg else name


def _group_keys(section: str, overrides: list[str] = ()) -> list[str]:
    """Keys a config section accepts: those of the group option chosen on the command line (or of its default;
    the union over the group's files when neither is known), or conf/sweep.yaml's own section."""
    import yaml

    top, _, rest = section.partition(".")
    chosen = [o.split("=", 1)[1] for o in overrides if o.startswith(f"{top}=")]
    default = {"launcher": "local"}.get(top)
    option = chosen[-1] if chosen else default
    files = ([CONF_DIR / top / f"{option}.yaml"] if option and (CONF_DIR / top / f"{option}.yaml").is_file()
             else list((CONF_DIR / top).glob("*.yaml"))) or [CONF_DIR / "sweep.yaml"]
    keys: set[str] = set()
    for f in files:
        node = yaml.safe_load(f.read_text()) or {}
        if f.name == "sweep.yaml":
            node = node.get(top, {})
        for part in rest.split(".") if rest else []:
            node = node.get(part, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            keys |= {k for k in node if k != "defaults"}
    return sorted(keys)


def read_experiment(cfg: dict) -> Experiment:
    exp = cfg.get("experiment")
    if not exp:
        raise UsageError("no experiment given: add +experiment=NAME (available: "
                         + ", ".join(available("experiment")) + ")")
    for key in ("name", "baseline", "metric", "lower_is_better", "variants"):
        if key not in exp:
            raise UsageError(f"experiment.{key} is missing in conf/experiment/{exp.get('name', '?')}.yaml")
    variants = exp["variants"] or {}
    if not isinstance(variants, dict) or not variants:
        raise UsageError("experiment.variants must map variant names to lists of overrides")
    if exp["baseline"] not in variants:
        raise UsageError(f"experiment.baseline={exp['baseline']!r} is not one of the variants: {', '.join(variants)}")
    for vname, ovs in variants.items():
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(vname)):
            raise UsageError(f"variant name {vname!r}: use letters, digits, '_', '-' and '.' only")
        if not isinstance(ovs, list) or not all(isinstance(o, str) for o in ovs):
            raise UsageError(f"experiment.variants.{vname} must be a list of 'key=value' overrides")
    if not isinstance(exp["lower_is_better"], bool):
        raise UsageError(f"experiment.lower_is_better={exp['lower_is_better']!r}: accepted values are true, false")
    return Experiment(name=str(exp["name"]), baseline=str(exp["baseline"]), metric=str(exp["metric"]),
                      lower_is_better=exp["lower_is_better"], variants={str(k): list(v) for k, v in variants.items()})


def run_config(cfg: dict, experiment: str, variant: str, seed: int = 0) -> dict:
    """The run-config mapping train.run() takes, validated (bad values -> UsageError naming the key)."""
    from train.config import ConfigError, RunConfig

    raw = {"seed": seed, "experiment": experiment, "variant": variant, **{s: cfg[s] for s in RUN_SECTIONS}}
    try:
        return RunConfig.from_dict(raw).to_dict()
    except ConfigError as e:
        raise UsageError(f"variant {variant}: {e}" if variant else str(e)) from None


def compose_sweep(overrides: list[str]) -> Sweep:
    """Compose the sweep and every variant; raises UsageError before anything is started or written."""
    cfg = compose(overrides)
    experiment = read_experiment(cfg)
    sweep = Sweep(overrides=list(overrides), cfg=cfg, experiment=experiment)
    run_config(cfg, experiment.name, "")          # command-line values, checked once for all variants
    for variant, variant_overrides in experiment.variants.items():
        try:
            vcfg = compose(list(overrides) + variant_overrides) if variant_overrides else cfg
        except UsageError as e:
            raise UsageError(f"experiment {experiment.name}, variant {variant}: {e}") from None
        sweep.variant_configs[variant] = run_config(vcfg, experiment.name, variant)
    _check_data(sweep.variant_configs)
    return sweep


def _check_data(variant_configs: dict[str, dict]) -> None:
    """Read each distinct corpus once so a missing/empty/non-text data.path fails before any run starts."""
    from train.config import ConfigError, DataConfig
    from train.corpus import corpus_text

    seen = set()
    for rc in variant_configs.values():
        key = tuple(sorted(rc["data"].items()))
        if key in seen:
            continue
        seen.add(key)
        try:
            corpus_text(DataConfig(**rc["data"]))
        except ConfigError as e:
            raise UsageError(str(e)) from None


def to_yaml(obj: Any) -> str:
    import yaml

    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)
