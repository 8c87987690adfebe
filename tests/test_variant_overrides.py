"""A variant's overrides mean what they mean on Hydra's command line: each variant's run config equals what Hydra's
own `compose` gives for the same overrides on the project's own primary config (group swaps of `_global_` presets,
`+`/`++`/`~`, nested groups, package overrides), in a project with its own config dir.

    python -m pytest -q -n 0 -p no:cacheprovider tests/test_variant_overrides.py
"""
import textwrap

import pytest
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from sweeper.config.composition.argv import with_config_dirs
from sweeper.config.sweep import compose_sweep
from tests.helpers.commands import run_sweeper

# variant -> overrides, each one form of Hydra's override grammar
VARIANTS = {
    "base": [],
    "wide": ["preset=wide"],                       # swap a group whose files are `# @package _global_`
    "nopreset": ["~preset"],                       # drop a group from the defaults list
    "big": ["net=big"],                          # swap a plain group
    "deep": ["net/size=l"],                      # a nested group (net/size, chosen in net/small.yaml)
    "fast": ["+extra=fast"],                       # add a group the defaults list lacks
    "lr": ["++opt.lr=0.5"],                        # force-set an existing key
    "mom": ["+opt.momentum=0.9"],                  # add a new key
    "nodecay": ["~opt.decay"],                     # delete a key
    "adam2": ["+opt@opt2=adam"],                   # a group at another package
    "combo": ["preset=wide", "net/size=l", "opt.lr=0.25"],
}


def project(root):
    """A Hydra project: its own primary config (conf/config.yaml) and groups; the experiment reuses that config."""
    files = {
        "config.yaml": """\
            defaults:
              - net: small
              - preset: narrow
              - opt: sgd
              - _self_
            steps: 10
            """,
        "net/small.yaml": "defaults:\n  - size: s\nname: small\n",
        "net/big.yaml": "defaults:\n  - size: s\nname: big\nheads: 8\n",
        "net/size/s.yaml": "layers: 2\n",
        "net/size/l.yaml": "layers: 12\n",
        "preset/narrow.yaml": "# @package _global_\nwidth: 8\nrun_name: narrow-${width}\n",
        "preset/wide.yaml": "# @package _global_\nwidth: 64\nrun_name: wide-${width}\ndropout: 0.1\n",
        "opt/sgd.yaml": "lr: 0.1\ndecay: 0.01\n",
        "opt/adam.yaml": "lr: 0.001\nbetas: [0.9, 0.999]\n",
        "extra/fast.yaml": "compile: true\n",
        "experiment/gp.yaml": f"""\
            # @package _global_
            defaults:
              - /config
              - override /task: custom
            task:
              command: [python, toy.py]
            experiment:
              name: gp
              baseline: base
              metric: loss
              lower_is_better: true
              variants: {VARIANTS!r}
              bundles: [combo]
            """,
    }
    for name, text in files.items():
        path = root / "conf" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    (root / "toy.py").write_text("import sweeper\nrun = sweeper.init()\nrun.finish(loss=1.0)\n")
    return root / "conf"


def hydra_config(conf_dir, overrides: list[str]) -> dict:
    """What plain Hydra composes for the project's primary config and these overrides."""
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(str(conf_dir), version_base=None):
            return OmegaConf.to_container(hydra_compose("config", overrides=overrides), resolve=True)
    finally:
        GlobalHydra.instance().clear()


@pytest.mark.slow
def test_every_variant_composes_as_hydra_composes_the_same_overrides(tmp_path, monkeypatch):
    conf = project(tmp_path)
    monkeypatch.chdir(tmp_path)
    sweep = compose_sweep(with_config_dirs(["+experiment=gp"], [conf]), start_checks=False)
    assert list(sweep.variant_configs) == list(VARIANTS)
    for variant, overrides in VARIANTS.items():
        ours = {k: v for k, v in sweep.variant_configs[variant].items() if k != "seed"}
        assert ours == hydra_config(conf, overrides), variant
    # the cases above are not trivially equal: each variant differs from the baseline
    assert sweep.variant_configs["wide"]["width"] == 64 and sweep.variant_configs["wide"]["run_name"] == "wide-64"
    assert "width" not in sweep.variant_configs["nopreset"]
    assert sweep.variant_configs["deep"]["net"]["size"] == {"layers": 12}
    assert sweep.variant_configs["adam2"]["opt2"] == {"lr": 0.001, "betas": [0.9, 0.999]}
    # a group swap is one declared change, attributed the keys it changes
    [declared] = sweep.changes["wide"]
    assert declared.override == "preset=wide" and set(declared.keys) == {"width", "run_name", "dropout"}


@pytest.mark.slow
def test_a_command_line_group_swap_applies_to_every_variant(tmp_path, monkeypatch):
    conf = project(tmp_path)
    monkeypatch.chdir(tmp_path)
    sweep = compose_sweep(with_config_dirs(["+experiment=gp", "preset=wide", "~experiment.variants.wide",
                                            "~experiment.variants.combo"], [conf]), start_checks=False)
    assert sweep.variant_configs["base"]["width"] == 64
    assert {k: v for k, v in sweep.variant_configs["big"].items() if k != "seed"} == \
        hydra_config(conf, ["preset=wide", "net=big"])


@pytest.mark.slow
def test_a_preset_variant_is_accepted_by_the_cli(tmp_path):
    project(tmp_path)
    proc = run_sweeper("--config-dir", "conf", "+experiment=gp", "sweeper.dry_run=true", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "wide                 preset=wide  -> preset=wide (3 keys" in proc.stdout, proc.stdout
