"""Many variants are composed by Hydra once (issue 48, scale): each variant's config is the one composing the
command line with its overrides gives, key for key and in the same order, and errors keep their one line.

    python -m pytest -q -n 0 tests/test_scale_variants.py
"""
from __future__ import annotations

import pytest
import yaml

from sweeper.config.composition.compose import compose
from sweeper.config.composition.variant_composer import VariantComposer
from sweeper.config.run_config import run_config
from sweeper.config.sweep import compose_sweep
from sweeper.errors import UsageError

VARIANTS = {
    "base": [],
    "width": ["width=3"],                               # an interpolation elsewhere follows it
    "added": ["+extra=5"],
    "dropped": ["~opt.name"],
    "group": ["model=big"],                             # a group choice: Hydra's full composition
    "mapping": ["opt={lr:0.5,name:adam}"],
    "listed": ["tags=[1,2,3]"],
    "seeded": ["seeds=0-4", "width=4"],
    "two": ["width=6", "opt.lr=0.01"],
}


def project(root):
    (root / "conf" / "experiment").mkdir(parents=True)
    (root / "conf" / "model").mkdir()
    (root / "conf" / "model" / "small.yaml").write_text("d: 8\nlayers: 1\n")
    (root / "conf" / "model" / "big.yaml").write_text("d: 64\nlayers: 4\n")
    lines = ["# @package _global_", "defaults:", "  - /model: small", "  - override /task: custom", "task:",
             "  command: [python, t.py]", "width: 0", "derived: ${width}", "flag: false", "tags: [1]",
             "secret: ${oc.env:HOME}", "opt:", "  lr: 0.1", "  name: sgd", "experiment:", "  name: mix",
             "  baseline: base", "  metric: val_loss", "  lower_is_better: true", "  variants:"]
    lines += [f"    {name}: {yaml.safe_dump(ovs, default_flow_style=True).strip()}" for name, ovs in VARIANTS.items()]
    (root / "conf" / "experiment" / "mix.yaml").write_text("\n".join(lines) + "\n")
    (root / "t.py").write_text("print('{\"val_loss\": 1}')\n")
    return [f"hydra.searchpath=['file://{root / 'conf'}']", "+experiment=mix", "seeds=0-2"]


@pytest.mark.slow
def test_each_variant_s_config_is_the_one_its_own_composition_gives_byte_for_byte(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    base = project(tmp_path)
    composer = VariantComposer(base)
    env = ["secret=${oc.env:SWEEPER_TEST_SECRET,x}"]     # (kept a reference; in the file it would be read)
    for name, ovs in [*VARIANTS.items(), ("env", env), ("env", env)]:
        quick, full = composer(base + ovs), compose(base + ovs)
        assert yaml.safe_dump(quick, sort_keys=False) == yaml.safe_dump(full, sort_keys=False), name
    assert composer._lean is not None               # the quick path copied the base without its experiment block
    assert composer(base + ["width=3"])["derived"] == 3
    assert composer(base + ["model=big"])["model"] == {"d": 64, "layers": 4}
    for bad in (["nokey=1"], ["+width=1"], ["~nokey"], ["width"]):      # the same one-line errors
        with pytest.raises(UsageError) as quick:
            composer(base + bad)
        with pytest.raises(UsageError) as full:
            compose(base + bad)
        assert str(quick.value) == str(full.value), bad
    sweep = compose_sweep(base, start_checks=False)      # the plan's run configs (the experiment file's variant
    for name, ovs in sweep.experiment.variants.items():  # lists come resolved: its ${oc.env:...} is read there)
        assert yaml.safe_dump(sweep.variant_configs[name], sort_keys=False) == \
            yaml.safe_dump(run_config(compose(base + ovs)), sort_keys=False), name
