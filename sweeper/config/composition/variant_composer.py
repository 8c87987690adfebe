"""Many variants of one command line, composed by Hydra once: each variant's value overrides applied to a copy.

    composer = VariantComposer(["+experiment=many", "seeds=0-2"])
    cfg = composer(["+experiment=many", "seeds=0-2", "width=3"])   # == compose([... "width=3"]), byte for byte

compose(overrides + variant) runs Hydra's whole composition (defaults tree, every YAML file, the schemas): about
0.1-0.8 s each, and a sweep composes each variant and, for the ablation check, the baseline with each declared
change. When a variant's overrides only set values (no config-group choice such as `model=big`, no sweep, no
`@package`, nothing that selects the task or the experiment or touches hydra.*), the defaults tree is the same
as the base's, and Hydra would apply these overrides last, after the command line's: so they are applied, by
Hydra's own step (ConfigLoaderImpl._apply_overrides_to_config), to a copy of the base's composed node. Anything
else, and any error on the quick path, goes through compose() itself (so errors keep their one line).
"""
from __future__ import annotations

import copy
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict

from sweeper.config.composition.argv import comma_lists, key_of
from sweeper.config.composition.compose import Composed, compose, compose_node
from sweeper.config.composition.inline_variants import quote_inline_variants
from sweeper.errors import UsageError


class VariantComposer:
    """compose(), with the composition of `base` (the command line) done once and reused."""

    def __init__(self, base: list[str]):
        self.base = list(base)
        self._composed: Composed | None = None
        self._lean: Composed | None = None      # the base without experiment: (its cost grows with the variants)
        self._experiment: Any = None           # the base's experiment block, plain
        self._keys: list[str] = []             # the base's top-level keys, in order
        self._done: dict[tuple[str, ...], dict] = {}    # the ablation check composes the same lists again
        self._parser = OverridesParser.create()

    def __call__(self, overrides: list[str]) -> dict:
        overrides = list(overrides)
        extra = tuple(overrides[len(self.base):])
        if overrides[:len(self.base)] != self.base:
            return compose(overrides)
        if extra not in self._done:
            try:
                quick = self._quick(list(extra))
            except UsageError:
                raise
            except Exception:  # noqa: BLE001 - whatever Hydra or OmegaConf raised: compose() says it in one line
                quick = None
            self._done[extra] = quick if quick is not None else compose(overrides)
        return _copied(self._done[extra])

    def _quick(self, extra: list[str]) -> dict | None:
        """The variant's config from the base's node, or None when its overrides need Hydra's full composition."""
        extra = quote_inline_variants(comma_lists(extra))
        if any(_selects(o) for o in extra):
            return None
        if self._composed is None:
            self._split(compose_node(self.base))
        base = self._composed
        parsed = self._parser.parse_overrides(extra)
        for override in parsed:
            if override.is_sweep_override() or override.package is not None:
                return None
            if base.repo.group_exists(override.key_or_group) and not isinstance(override.value(), dict):
                return None                                   # a group choice: another defaults tree
        if self._lean is None:
            return base.with_values(parsed, extra).plain()
        cfg = self._lean.with_values(parsed, extra).plain()  # raises (then compose()) if it reads experiment.*
        cfg["experiment"] = _copied(self._experiment)
        return {k: cfg[k] for k in [*self._keys, *(k for k in cfg if k not in self._keys)] if k in cfg}

    def _split(self, composed: Composed) -> None:
        """Keep the base; and, when its experiment block holds no interpolation (nothing of it depends on a
        variant's values), the base without that block (copied once per variant) and the block, plain."""
        node = composed.node
        plain = Composed(copy.deepcopy(node), composed.overrides, composed.groups, composed.repo).plain()
        self._composed = composed            # its overrides checked just above (with_values checks only the new)
        self._keys = list(node.keys())
        if "experiment" not in node or _interpolates(node._get_node("experiment")):
            return
        lean = copy.deepcopy(node)
        with open_dict(lean):
            del lean["experiment"]
        self._experiment = OmegaConf.to_container(node.experiment, resolve=True)
        self._lean = Composed(lean, composed.overrides, composed.groups, composed.repo)
        try:                                 # nothing else reads experiment.* (an ${oc.select:...} would not fail)
            same = self._quick([]) == plain
        except Exception:  # noqa: BLE001 - it reads it: every variant copies the whole base
            same = False
        if not same:
            self._lean = None


def _copied(value: Any) -> Any:
    """A copy of a plain config (dicts, lists, scalars): what copy.deepcopy gives, at a fifth of its cost."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    return value


def _interpolates(node: Any) -> bool:
    if node is None or not isinstance(node, (DictConfig, ListConfig)):
        return node is not None and node._is_interpolation()
    if node._is_interpolation() or node._is_missing() or node._is_none():
        return node._is_interpolation()
    keys = node.keys() if isinstance(node, DictConfig) else range(len(node))
    return any(_interpolates(node._get_node(k)) for k in keys)


def _selects(override: str) -> bool:
    """Whether an override selects what the composition is built from (the experiment, the task, Hydra's own
    settings and search path), which the base's node cannot take afterwards."""
    key = key_of(override)
    return key in ("experiment", "task") or key.startswith(("task.", "task/", "task@", "hydra", "experiment"))
