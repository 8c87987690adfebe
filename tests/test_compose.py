"""Composition of every experiment, user config dirs, and bad input: one line, exit 2, nothing started or written."""
import textwrap
from pathlib import Path

import pytest

from sweeper.config.composition.argv import split_config_dirs, with_config_dirs
from sweeper.config.composition.search import CONF_DIR, search_dirs
from sweeper.config.seeds import Seeds
from sweeper.config.sweep import compose_sweep
from sweeper.errors import UsageError
from sweeper.plan.make import make_plan
from tests.helpers.commands import ROOT, run_sweeper

EXPERIMENTS = sorted(p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml"))
TRAINER_KEYS = {"seed", "model", "data", "train", "health"}


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_composes(name):
    sweep = compose_sweep([f"+experiment={name}"])
    exp = sweep.experiment
    assert exp.baseline in exp.variants
    assert set(sweep.variant_configs) == set(exp.variants)
    assert sweep.task.entry == "sweeper.train:main" and sweep.task.validate == "sweeper.train.checks:validate"
    for cfg in sweep.variant_configs.values():
        assert set(cfg) == TRAINER_KEYS and cfg["seed"] == 0      # no sweeper keys, no identity keys


@pytest.mark.slow
def test_rope_experiment_variants():
    sweep = compose_sweep(["+experiment=rope"])
    v = sweep.variant_configs
    assert sweep.experiment.baseline == "rope" and sweep.experiment.lower_is_better
    assert sweep.experiment.variants == {"rope": [], "nope": ["model.pos_encoding=none"],
                                         "rope_frozen_qk": ["model.rope_impl=fault_no_qk_grad"]}
    assert v["rope"]["model"]["pos_encoding"] == "rope" and v["rope"]["model"]["rope_impl"] == "auto"
    assert v["nope"]["model"]["pos_encoding"] == "none"
    assert v["rope_frozen_qk"]["model"]["rope_impl"] == "fault_no_qk_grad"


@pytest.mark.slow
def test_variant_seeds_is_a_variants_own_seeds_override_parsed_or_none():
    sweep = compose_sweep(["+experiment=rope", "seeds=0-3",
                           "experiment.variants.nope=['model.pos_encoding=none','seeds=[5,7]']"])
    assert sweep.seeds == Seeds.of([0, 1, 2, 3]) and sweep.seeds.count == 4     # parsed once, typed
    assert sweep.variant_seeds == {"rope": None, "nope": Seeds.of([5, 7]), "rope_frozen_qk": None}
    assert "seeds" not in sweep.variant_configs["nope"]
    with pytest.raises(UsageError, match=r"^experiment rope, variant nope: seeds=\[\] is empty"):
        compose_sweep(["+experiment=rope", "experiment.variants.nope=['seeds=[]']"])


@pytest.mark.slow
def test_command_line_override_applies_to_every_variant_and_variant_wins():
    sweep = compose_sweep(["+experiment=rope", "train.steps=7", "model.pos_encoding=rope"])
    assert all(c["train"]["steps"] == 7 for c in sweep.variant_configs.values())
    assert sweep.variant_configs["nope"]["model"]["pos_encoding"] == "none"


@pytest.mark.slow
@pytest.mark.parametrize("args, needle", [
    (["+experiment=nosuch"], "unknown experiment 'nosuch': available experiments are rope"),
    (["experiment=rope"], "+experiment=NAME"),
    (["seeds=1"], "no experiment given"),
    (["+experiment=rope", "model.widht=3"], "unknown config key 'model.widht'; keys of model are: context,"),
    (["+experiment=rope", "nosuchkey=3"], "top-level keys are: data, experiment, health, launcher, model,"),
    (["+experiment=rope", "train.steps=="], "malformed override"),
    (["+experiment=rope", "seeds=3-1"], "seeds='3-1'"),
    (["+experiment=rope", "seeds=[1,1]"], "repeats 1"),
    (["+experiment=rope", "seeds=[]"], "seeds=[] is empty"),
    (["+experiment=rope", "seeds=-1"], "-1 is not a seed"),
    (["+experiment=rope", "train.steps=0"], "train.steps=0"),
    (["+experiment=rope", "train.batch_size=-4"], "train.batch_size=-4"),
    (["+experiment=rope", "model=huge"], "unknown model 'huge': available model configs are small"),
    (["+experiment=rope", "task=nosuch"], "unknown task 'nosuch': available task configs are custom, train"),
    (["+experiment=rope", "model.pos_encoding=alibi"], "model.pos_encoding='alibi'"),
    (["+experiment=rope", "data=text"], "data.path is required (it is ??? in the config)"),
    (["+experiment=rope", "data=text", "data.path=/no/such/file.txt"], "no such file"),
    (["+experiment=rope", "launcher.name=kubernetes"], "launcher.name='kubernetes'"),
    (["+experiment=rope", "+experiment.variants.bad=['model.nokey=1']"], "variant bad"),
    (["+experiment=rope", "+experiment.variants.bad=['model.d_model=30']"], "variant bad: model.d_model=30"),
    (["+experiment=rope", "+experiment.variants.bad=['task.entry=x:y']"], "a variant cannot change task.*"),
    (["--config-dir", "/no/such/dir", "+experiment=rope"], "--config-dir /no/such/dir: no such directory"),
    (["+experiment=rope", "--config-dir"], "--config-dir needs a directory"),
    (["+experiment=rope", "--multirun"], "unknown option --multirun: accepted are --config-dir DIR (-cd DIR)"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, args, needle):
    sweep_dir = tmp_path / "sweep"
    proc = run_sweeper(*args, f"sweeper.dir={sweep_dir}", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("sweeper: error:") and needle in err, err
    assert not sweep_dir.exists()
    assert list(tmp_path.iterdir()) == []          # no sweeps/ folder either


@pytest.mark.slow
def test_an_error_every_variant_shares_is_named_once_without_a_variant():
    with pytest.raises(UsageError) as e:
        compose_sweep(["+experiment=rope", "train.steps=0"])
    assert str(e.value).startswith("train.steps=0") and "variant" not in str(e.value)


@pytest.mark.parametrize("content, needle", [(b"", "empty"), (b"\x00\x01binary" * 200, "not a text file"),
                                             (b"\xff\xfe\xfa" * 500, "not UTF-8")])
def test_bad_user_corpus(tmp_path, content, needle):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(content)
    with pytest.raises(UsageError, match=needle):
        compose_sweep(["+experiment=rope", "data=text", f"data.path={corpus}"])


@pytest.mark.slow
def test_user_corpus_is_accepted(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog\n" * 200)
    sweep = compose_sweep(["+experiment=rope", "data=text", f"data.path={corpus}"])
    assert sweep.variant_configs["rope"]["data"] == {"kind": "text", "path": str(corpus), "val_fraction": 0.1}


def test_conf_dir_is_the_repo_conf_found_as_the_package_sweeper_conf():
    assert CONF_DIR == ROOT / "conf" and (CONF_DIR / "sweep.yaml").is_file()
    assert (CONF_DIR / "__init__.py").is_file()          # conf/ is the package sweeper.conf (pyproject.toml)


# -- your own config dirs ---------------------------------------------------------------------------------------

def user_project(root, command="[python, toy.py]"):
    """A user project: conf/experiment/toy.yaml (task=custom, own group opt/), toy.py, hooks.py."""
    (root / "conf" / "experiment").mkdir(parents=True)
    (root / "conf" / "opt").mkdir()
    (root / "conf" / "experiment" / "toy.yaml").write_text(textwrap.dedent(f"""\
        # @package _global_
        defaults:
          - /opt: plain
          - override /task: custom
        task:
          command: {command}
          validate: hooks:validate
        experiment:
          name: toy
          baseline: base
          metric: loss
          lower_is_better: true
          variants:
            base: []
            fast: [opt.lr=0.5]
        steps: 6
        """))
    (root / "conf" / "opt" / "plain.yaml").write_text("lr: 0.1\ndecay: 0.0\n")
    (root / "conf" / "opt" / "other.yaml").write_text("lr: 0.2\ndecay: 0.5\n")
    (root / "hooks.py").write_text(textwrap.dedent("""\
        def validate(config):
            if config["opt"]["lr"] <= 0:
                raise ValueError(f"opt.lr={config['opt']['lr']}: must be positive")
        """))
    (root / "toy.py").write_text("import sweeper\nrun = sweeper.init()\nrun.finish(loss=float(run.config.opt.lr))\n")
    return root


@pytest.mark.slow
def test_user_config_dir_experiment_and_own_group(tmp_path, monkeypatch):
    user_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    dirs, rest = split_config_dirs(["--config-dir", "conf", "+experiment=toy", "opt=other"])
    assert dirs == [tmp_path / "conf"] and rest == ["+experiment=toy", "opt=other"]
    sweep = compose_sweep(with_config_dirs(rest, dirs))
    assert sweep.task.command == ("python", "toy.py") and sweep.task.cwd == str(tmp_path)
    assert sweep.task.validate == "hooks:validate" and sweep.task.entry is None
    # Every top-level key but the sweeper's own: the user's steps and opt group, and the seed.
    assert sweep.variant_configs == {"base": {"seed": 0, "opt": {"lr": 0.2, "decay": 0.5}, "steps": 6},
                                     "fast": {"seed": 0, "opt": {"lr": 0.5, "decay": 0.5}, "steps": 6}}
    with pytest.raises(UsageError, match=r"^variant base: opt.lr=-1: must be positive$"):
        compose_sweep(with_config_dirs(["+experiment=toy", "opt.lr=-1"], dirs))    # the task's validate hook


def test_config_dir_forms_and_hydra_searchpath_merge(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b c").mkdir()
    dirs, rest = split_config_dirs(["-cd", str(tmp_path / "a"), f"--config-dir={tmp_path / 'b c'}", "x=1"])
    assert dirs == [tmp_path / "a", tmp_path / "b c"] and rest == ["x=1"]
    merged = with_config_dirs(["hydra.searchpath=[file:///opt/shared]", "x=1"], dirs)
    assert merged == [f"hydra.searchpath=['file:///opt/shared','file://{tmp_path / 'a'}','file://{tmp_path / 'b c'}']",
                      "x=1"]
    assert search_dirs(merged) == [CONF_DIR, Path("/opt/shared"), tmp_path / "a", tmp_path / "b c"]


@pytest.mark.slow
def test_errors_list_the_options_of_the_user_config_dirs(tmp_path):
    user_project(tmp_path)
    proc = run_sweeper("--config-dir", "conf", "+experiment=nosuch", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"sweeper: error: unknown experiment 'nosuch': available experiments are rope, toy "
                                   f"(searched {CONF_DIR}, {tmp_path / 'conf'})")
    proc = run_sweeper("--config-dir", "conf", "+experiment=toy", "opt=fancy", cwd=tmp_path)
    assert proc.stderr.strip().endswith("unknown opt 'fancy': available opt configs are other, plain "
                                        f"(searched {CONF_DIR}, {tmp_path / 'conf'})"), proc.stderr
    proc = run_sweeper("--config-dir", "conf", "+experiment=toy", "opt.lrr=1", cwd=tmp_path)
    assert proc.stderr.strip() == "sweeper: error: unknown config key 'opt.lrr'; keys of opt are: decay, lr"
    proc = run_sweeper("seeds=1", cwd=tmp_path, env={})
    assert "add your own with --config-dir DIR" in proc.stderr
    # hydra.searchpath given by hand works as --config-dir does
    proc = run_sweeper(f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "+experiment=toy", "sweeper.dry_run=true",
                       cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "task: python toy.py" in proc.stdout and "experiment toy: 2 variants x 4 seeds" in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conf", "hooks.py", "toy.py"]     # a dry run writes nothing


def test_a_variant_s_huge_seed_range_is_counted_not_expanded_and_refused(tmp_path):
    import time

    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "huge.yaml").write_text(textwrap.dedent("""\
        # @package _global_
        experiment:
          name: huge
          baseline: a
          metric: val_loss
          lower_is_better: true
          controls: [b]
          variants:
            a: []
            b: [seeds=0-1000000000000]
        """))
    t0 = time.time()
    sweep = compose_sweep(["hydra.searchpath=[file://" + str(tmp_path / "conf") + "]", "+experiment=huge", "seeds=0",
                           f"sweeper.dir={tmp_path / 's'}"])
    assert sweep.variant_seeds["b"].count == 1000000000001
    with pytest.raises(UsageError, match=r"^the plan has 1000000000002 runs \(a: 1 \+ b: 1000000000001\), more than "
                                         r"sweeper.max_runs=1000; ask for fewer seeds"):
        make_plan(sweep)
    assert time.time() - t0 < 30                    # a trillion seeds were never built
    assert not (tmp_path / "s").exists()
