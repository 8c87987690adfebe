"""Resources per variant: what the launcher gives each run of a variant (experiment.resources), checked once.

    declared = read_resources(cfg["experiment"], variants, overrides)   # {"wide": {"ranks_per_run": 2}}
    effective = effective_resources(variants, declared, cfg["launcher"])  # every variant: {"ranks_per_run": N}

```yaml
experiment:
  variants: {base: [], wide: [model.d_model=512]}
  resources:
    wide: {ranks_per_run: 2}          # each run of `wide` is 2 data-parallel ranks (2 GPUs, or 2 CPU slots)
```

A variant without an entry gets the launcher's own (launcher.ranks_per_run, default 1). Keys are typed by
sweeper.config.schema.ResourcesConf; an unknown variant or key, or a value out of range, is one line naming it
(exit 2). A variant dropped on the command line (`~experiment.variants.wide`) takes its entry along. The
effective resources are part of the plan: recorded per variant in the manifest (`resources`; a sweep dir
without them ran every variant on 1 rank) and in the sweep's identity when any run has more than one rank.
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Any, Mapping

from sweeper.config.fields import build, keys_of, show
from sweeper.config.schema import ResourcesConf
from sweeper.errors import UsageError

DEFAULT = {"ranks_per_run": 1}


def read_resources(experiment: Mapping[str, Any], variants, overrides=()) -> dict[str, dict]:
    """The checked experiment.resources: variant -> the keys it sets (None values left out)."""
    raw = experiment.get("resources")
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise UsageError(f"experiment.resources={show(raw)}: expected a mapping of variant -> resources, e.g. "
                         f"{{wide: {{ranks_per_run: 2}}}}")
    dropped = {o.split("=", 1)[0].lstrip("~").removeprefix("experiment.variants.") for o in overrides
               if o.startswith("~experiment.variants.")}
    out = {}
    for name, value in raw.items():
        if name in dropped:
            continue
        if name not in variants:
            raise UsageError(f"experiment.resources.{name}: no variant {name!r} in the experiment; its variants are "
                             f"{', '.join(variants)}")
        if not isinstance(value, Mapping):
            raise UsageError(f"experiment.resources.{name}={show(value)}: expected a mapping with keys "
                             f"{', '.join(keys_of(ResourcesConf))}, e.g. {{ranks_per_run: 2}}")
        conf = build(ResourcesConf, dict(value), f"experiment.resources.{name}")
        out[str(name)] = {k: v for k, v in asdict(conf).items() if v is not None}
    return out


def effective_resources(variants, declared: Mapping[str, dict], launcher: Mapping[str, Any] | None) -> dict[str, dict]:
    """Every variant's resources: its own entry, else the launcher's keys, else the defaults."""
    launcher = launcher or {}
    base = {k: launcher.get(k) or v for k, v in DEFAULT.items()}
    return {v: {**base, **declared.get(v, {})} for v in variants}


def ranks_of(resources: Mapping[str, dict], variant: str) -> int:
    """A variant's ranks per run from recorded resources (a variant or sweep without them: 1)."""
    return int((resources.get(variant) or {}).get("ranks_per_run") or 1)
