"""One change per variant, checked before launch: what each variant changes against the baseline, and the rules.

    declared, warnings = check_ablation(sweep, compose)   # called by compose_sweep; UsageError on an identical variant

A declared change is one override of a variant that the baseline does not have (a config-group swap such as
`model=big` is one change however many keys it sets), or one of the baseline's overrides the variant drops.
Each is attributed the run-config keys it changes, from resolved configs (composing the baseline with that one
override when a variant declares several). Overrides of the sweep's own keys (seeds=, sweeper.*, launcher.*)
are not changes of the run.

- A variant whose run config equals the baseline's, or another variant's, is refused (exit 2) unless it is
  named in experiment.controls (a deliberate A/A control).
- A variant with more than one declared change, or whose changed keys touch more than one concern (model,
  optimizer, data, evaluation, budget, other: sweeper.config.variants.concerns; a group swap `model=big` that also sets
  `optim.lr` is one change in two concerns), gets a warning naming them (sweeper.one_change=error refuses it,
  =off says nothing) unless it is named in experiment.bundles.
- An override that changes nothing (the value is already the baseline's) is a warning.
"""
from __future__ import annotations

from typing import Callable

from sweeper.config.composition.argv import key_of
from sweeper.config.run_config import RESERVED, run_config
from sweeper.config.variants.concerns import by_concern, describe_concerns
from sweeper.config.variants.config_diff import Declared, diff_configs
from sweeper.errors import UsageError
from sweeper.run.files.hashing import stable_hash


def is_run_change(override: str) -> bool:
    """Whether an override can change the run config (not the sweep's own keys)."""
    return key_of(override).split(".")[0].split("@")[0] not in RESERVED


def declared_overrides(variant: list[str], baseline: list[str]) -> list[str]:
    """The variant's declared changes against the baseline: its own overrides, then the baseline's it drops
    (spelled `(no BASELINE_OVERRIDE)`); a baseline override of a key the variant sets itself is replaced, not
    dropped, so it is no change of its own."""
    own = [o for o in variant if o not in baseline and is_run_change(o)]
    replaced = {key_of(o) for o in own}        # `how=b` against the baseline's `how=a`: one change, not two
    dropped = [f"(no {o})" for o in baseline if o not in variant and is_run_change(o) and key_of(o) not in replaced]
    return own + dropped


def attribute(sweep, variant: str, compose: Callable[[list[str]], dict]) -> list[Declared]:
    """Each declared change of `variant` with the run-config keys it changes against the baseline."""
    exp = sweep.experiment
    base_ovs, var_ovs = exp.variants[exp.baseline], exp.variants[variant]
    base_cfg = sweep.variant_configs[exp.baseline]
    declared = declared_overrides(var_ovs, base_ovs)
    if len(declared) <= 1:
        keys = tuple(c.key for c in diff_configs(base_cfg, sweep.variant_configs[variant]))
        return [Declared(d, keys) for d in declared]
    out = []
    for d in declared:
        if d.startswith("(no "):
            dropped = d[4:-1]
            alone = [o for o in base_ovs if o != dropped]
        else:
            alone = list(base_ovs) + [d]
        try:
            cfg = run_config(compose(list(sweep.overrides) + alone))
        except UsageError:          # meaningful only together with the variant's other overrides
            out.append(Declared(d, ()))
            continue
        out.append(Declared(d, tuple(c.key for c in diff_configs(base_cfg, cfg))))
    return out


def check_ablation(sweep, compose: Callable[[list[str]], dict]) -> tuple[dict[str, list[Declared]], list[str]]:
    """(variant -> its declared changes, warnings); UsageError for a variant that changes nothing, or is
    another variant's twin, unless declared an A/A control."""
    exp = sweep.experiment
    mode = (sweep.sweeper.one_change or "warn")
    controls, bundles = set(exp.controls), set(exp.bundles)
    for name in sorted((controls | bundles) - set(exp.variants)):
        key = "controls" if name in controls else "bundles"
        raise UsageError(f"experiment.{key} names {name!r}, which is not a variant: the variants are "
                         f"{', '.join(exp.variants)}")
    for name in exp.notes:
        if name not in exp.variants:
            raise UsageError(f"experiment.notes names {name!r}, which is not a variant: the variants are "
                             f"{', '.join(exp.variants)}")
    if exp.baseline in controls | bundles:
        raise UsageError(f"experiment.{'controls' if exp.baseline in controls else 'bundles'} names the baseline "
                         f"{exp.baseline!r}: list only variants compared with it")
    _refuse_twins(sweep, controls)
    declared, warnings = {}, []
    for variant in exp.variants:
        if variant == exp.baseline:
            continue
        mine = attribute(sweep, variant, compose)
        declared[variant] = mine
        for d in mine:
            if not d.keys and len(mine) > 1:
                warnings.append(f"variant {variant}: {d.override} changes nothing in the run config (the baseline "
                                f"{exp.baseline} already has that value); drop it from the variant")
        effective = [d for d in mine if d.keys]
        keys = [c.key for c in diff_configs(sweep.variant_configs[exp.baseline], sweep.variant_configs[variant])]
        concerns = by_concern(keys, mine)
        if (len(effective) > 1 or len(concerns) > 1) and variant not in bundles and mode != "off":
            what = "; ".join(d.override for d in effective)
            many = (f"makes {len(effective)} changes at once ({what})" if len(effective) > 1 else
                    f"makes one change ({what})")
            if len(concerns) > 1:
                many += (f"{' in' if len(effective) > 1 else ' that touches'} {len(concerns)} concerns "
                         f"(several_concerns: {describe_concerns(concerns)})")
            line = (f"variant {variant} {many}: its result cannot say which one mattered; split it into one "
                    f"variant per change, or declare the bundle with experiment.bundles=[{variant}]")
            if mode == "error":
                raise UsageError(f"{line} (sweeper.one_change=error)")
            warnings.append(line)
    return declared, warnings


def _refuse_twins(sweep, controls: set[str]) -> None:
    exp = sweep.experiment
    seen: dict[str, str] = {}
    for variant in [exp.baseline] + [v for v in exp.variants if v != exp.baseline]:
        config = {k: v for k, v in sweep.variant_configs[variant].items() if k != "seed"}
        h = stable_hash(config)
        twin = seen.get(h)
        if twin is not None and variant not in controls:
            what = (f"identical to the baseline {twin}" if twin == exp.baseline else f"identical to variant {twin}")
            overrides = " ".join(exp.variants[variant]) or "no overrides"
            raise UsageError(f"experiment {exp.name}: variant {variant} is {what} (its run config is the same; "
                             f"overrides: {overrides}): change it, drop it, or declare a deliberate A/A control "
                             f"with experiment.controls=[{variant}]")
        seen.setdefault(h, variant)
