"""Hydra composition: a command line's overrides -> the composed config as a plain dict, typed by the schemas.

    cfg = compose(["+experiment=rope", "train.steps=100"])      # interpolations resolved; `???` kept
                                                                 # (${oc.env:...} of the run config kept: envrefs)
    print(to_yaml(cfg))                                          # what `python -m sweeper ... --cfg` prints

The configs ship inside the package (sweeper.conf, the repo's conf/); `--config-dir DIR` adds a directory to
Hydra's search path (sweeper.config.composition.argv). Every Hydra error becomes a one-line UsageError naming the
override and
what is accepted (sweeper.config.composition.hydra_errors); a typed boolean takes true or false only, from a file too.
"""
from __future__ import annotations

import copy
import math
import pickle
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable

import yaml
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict
from omegaconf.errors import ValidationError
from omegaconf.nodes import BooleanNode, FloatNode

from sweeper.config.composition.argv import comma_lists, key_of, override_value
from sweeper.config.composition.hydra_errors import explain_hydra_error
from sweeper.config.composition.inline_variants import quote_inline_variants
from sweeper.config.composition.search import CONF_DIR, search_dirs
from sweeper.config.composition.task_base import with_task_base
from sweeper.config.composition.user_groups import keep_user_files
from sweeper.config.composition.yaml_bounds import check_yaml_files
from sweeper.config.fields import show
from sweeper.config.run_config import RESERVED
from sweeper.config.schema import register
from sweeper.errors import UsageError
from sweeper.run.observed.envrefs import keep_env_refs

MISSING = "???"


def compose(overrides: list[str]) -> dict:
    """Compose sweep.yaml with overrides into a plain dict (interpolations resolved; `???` values kept)."""
    return _explained(overrides, _compose)


def compose_node(overrides: list[str]) -> Composed:
    """The composition of `overrides` before it becomes a plain dict (sweeper.config.composition.variant_composer
    applies each variant's value overrides to it instead of composing again); errors as compose's."""
    return _explained(overrides, _compose_node)


def _explained(overrides: list[str], then: Callable[[list[str]], Any]) -> Any:
    overrides = quote_inline_variants(comma_lists(overrides))
    check_yaml_files(overrides)                              # an alias bomb: one line, before Hydra reads it
    try:
        overrides = with_task_base(overrides, _compose)      # task.config_file: the script's YAML, first
        return then(overrides)
    except UsageError:
        raise
    except Exception as e:  # Hydra raises several types; each becomes one line
        raise UsageError(explain_hydra_error(e, overrides, _compose)) from None


@dataclass
class Composed:
    """Hydra's composed config (hydra: removed, interpolations unresolved), the overrides it was composed from,
    the config groups Hydra chose, and the repository that says which keys are groups."""
    node: DictConfig
    overrides: list[str]
    groups: set[str]
    repo: Any
    checked: int = 0                  # how many of the overrides plain() has checked already (the base's)

    def plain(self) -> dict:
        """The checked plain dict (consumes the node: keep_env_refs escapes it in place)."""
        _strict_booleans(self.node, [o for o in self.overrides[self.checked:] if key_of(o) not in self.groups])
        new = self.overrides[self.checked:]       # a copy of a checked base: only the top-level keys they set
        _finite_floats(self.node, only={key_of(o).split(".")[0] for o in new} if self.checked else None)
        keep_env_refs(self.node, skip=RESERVED)  # ${oc.env:SECRET} of the run config stays a reference on disk
        return OmegaConf.to_container(self.node, resolve=True)

    def with_values(self, parsed: list, overrides: list[str]) -> Composed:
        """A copy with Hydra's own step for value overrides applied (`parsed`: Hydra Override objects of
        `overrides`, none of them a config group), as composing self.overrides + overrides would apply them.
        Its plain() checks only `overrides`: self.overrides are checked by self.plain(), which the caller runs."""
        try:                          # OmegaConf pickles a node whole (flags, types, parents): deepcopy, at half
            node = pickle.loads(pickle.dumps(self.node, protocol=pickle.HIGHEST_PROTOCOL))     # the cost
        except Exception:  # noqa: BLE001 - a schema class pickle cannot name (a local class): deepcopy
            node = copy.deepcopy(self.node)
        with _strict_boolean_nodes():
            ConfigLoaderImpl._apply_overrides_to_config(parsed, node)
        return Composed(node, self.overrides + list(overrides), self.groups, self.repo, checked=len(self.overrides))


def _compose(overrides: list[str]) -> dict:
    return _compose_node(overrides).plain()


def _compose_node(overrides: list[str]) -> Composed:
    if not (CONF_DIR / "sweep.yaml").is_file():
        raise UsageError(f"sweeper's configs are not installed ({CONF_DIR / 'sweep.yaml'} is missing); "
                         f"reinstall sweeper (pip install .)")
    register()                                   # the structured configs (schemas) of every typed group
    keep_user_files(search_dirs(overrides)[1:])  # a user's model/small.yaml is theirs, not the demo's schema
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(str(CONF_DIR), version_base=None), _strict_boolean_nodes():
            cfg = hydra_compose("sweep", overrides=list(overrides), return_hydra_config=True)
            # the repository with the search path these overrides add (--config-dir): which keys are groups
            _, repo = GlobalHydra.instance().config_loader()._parse_overrides_and_create_caching_repo(
                "sweep", list(overrides))
        groups = set(cfg.hydra.runtime.choices)        # what Hydra read as config-group choices (preset=wide)
        with open_dict(cfg):                           # then what hydra.compose returns by default
            del cfg["hydra"]
        return Composed(cfg, list(overrides), groups, repo)
    finally:
        GlobalHydra.instance().clear()


@contextmanager
def _strict_boolean_nodes():
    """While composing, a typed boolean takes true or false only, from a YAML file too (OmegaConf would turn
    `yes`, `on`, `1` into true); OmegaConf has no option for it, so its BooleanNode conversion is narrowed here
    (and put back). Without that hook (another OmegaConf) the command line is still checked by _strict_booleans."""
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
    """A typed boolean takes true or false only (OmegaConf would also turn `yes`, `1`, `2` into a boolean).
    `overrides`: the command line's value overrides (a group choice such as `preset=wide` sets no key)."""
    for override in overrides:
        key = key_of(override)
        if "=" not in override or override.startswith("~") or key.startswith("hydra"):
            continue
        section, _, leaf = key.rpartition(".")
        parent = OmegaConf.select(cfg, section, default=None) if section else cfg
        node = parent._get_node(leaf) if OmegaConf.is_dict(parent) and leaf in parent else None
        value = override_value(key, [override])
        if isinstance(node, BooleanNode) and value is not None and not isinstance(value, bool):
            raise UsageError(f"{key}={show(value)}: expected a boolean (true or false)")


def _finite_floats(node: Any, prefix: str = "", only: set[str] | None = None) -> None:
    """Every typed float key of every schema (sweeper's, the launchers', the trainer's groups, a user's
    `sweeper.schemas` groups) holds a finite number: inf or nan would mean "never" or nothing (a grace period
    that never ends, a learning rate that is not a number). Untyped keys (plain YAML) are the user's own."""
    items = node.items_ex(resolve=False) if isinstance(node, DictConfig) else enumerate(node)
    for key, _ in list(items):
        if only is not None and key not in only:
            continue
        child = node._get_node(key)
        name = f"{prefix}{key}" if isinstance(node, DictConfig) else f"{prefix[:-1]}[{key}]"
        if isinstance(child, (DictConfig, ListConfig)):
            if not child._is_missing() and not child._is_none() and not child._is_interpolation():
                _finite_floats(child, f"{name}.")
        elif isinstance(child, FloatNode):
            value = child._value()
            if isinstance(value, float) and not math.isfinite(value):
                raise UsageError(f"{name}={value}: must be a finite number (inf and nan are refused)")


def missing_keys(node: Any, prefix: str = "") -> list[str]:
    if isinstance(node, dict):
        return [k for key, v in node.items() for k in missing_keys(v, f"{prefix}{key}.")]
    if isinstance(node, list):
        return [k for i, v in enumerate(node) for k in missing_keys(v, f"{prefix}{i}.")]
    return [prefix[:-1]] if node == MISSING else []


def to_yaml(obj: Any) -> str:
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)
