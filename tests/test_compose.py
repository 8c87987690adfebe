"""Composition of every experiment, and bad input: one line, exit 2, nothing started or written."""

import pytest

from conftest import ROOT, run_sweeper
from sweeper.compose import CONF_DIR, compose_sweep
from sweeper.errors import UsageError

EXPERIMENTS = sorted(p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_composes(name):
    sweep = compose_sweep([f"+experiment={name}"])
    exp = sweep.experiment
    assert exp.baseline in exp.variants
    assert set(sweep.variant_configs) == set(exp.variants)
    for cfg in sweep.variant_configs.values():
        assert {"model", "data", "train", "health", "seed", "variant"} <= set(cfg)


def test_rope_experiment_variants():
    sweep = compose_sweep(["+experiment=rope"])
    v = sweep.variant_configs
    assert sweep.experiment.baseline == "rope" and sweep.experiment.lower_is_better
    assert v["rope"]["model"]["pos_encoding"] == "rope" and v["rope"]["model"]["rope_impl"] == "auto"
    assert v["nope"]["model"]["pos_encoding"] == "none"
    assert v["rope_frozen_qk"]["model"]["rope_impl"] == "fault_no_qk_grad"


def test_command_line_override_applies_to_every_variant_and_variant_wins():
    sweep = compose_sweep(["+experiment=rope", "train.steps=7", "model.pos_encoding=rope"])
    assert all(c["train"]["steps"] == 7 for c in sweep.variant_configs.values())
    assert sweep.variant_configs["nope"]["model"]["pos_encoding"] == "none"


@pytest.mark.parametrize("args, needle", [
    (["+experiment=nosuch"], "unknown experiment 'nosuch'"),
    (["experiment=rope"], "+experiment=NAME"),
    (["seeds=1"], "no experiment given"),
    (["+experiment=rope", "model.widht=3"], "model.widht"),
    (["+experiment=rope", "nosuchkey=3"], "nosuchkey"),
    (["+experiment=rope", "train.steps=="], "malformed override"),
    (["+experiment=rope", "seeds=3-1"], "seeds='3-1'"),
    (["+experiment=rope", "seeds=[1,1]"], "repeats 1"),
    (["+experiment=rope", "seeds=[]"], "seeds=[] is empty"),
    (["+experiment=rope", "seeds=-1"], "-1 is not a seed"),
    (["+experiment=rope", "train.steps=0"], "train.steps=0"),
    (["+experiment=rope", "train.batch_size=-4"], "train.batch_size=-4"),
    (["+experiment=rope", "model=huge"], "unknown model 'huge'"),
    (["+experiment=rope", "model.pos_encoding=alibi"], "model.pos_encoding='alibi'"),
    (["+experiment=rope", "data=text"], "data.path is required"),
    (["+experiment=rope", "data=text", "data.path=/no/such/file.txt"], "no such file"),
    (["+experiment=rope", "launcher.name=kubernetes"], "launcher.name='kubernetes'"),
    (["+experiment=rope", "+experiment.variants.bad=['model.nokey=1']"], "variant bad"),
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


@pytest.mark.parametrize("content, needle", [(b"", "empty"), (b"\x00\x01binary" * 200, "not a text file"),
                                             (b"\xff\xfe\xfa" * 500, "not UTF-8")])
def test_bad_user_corpus(tmp_path, content, needle):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(content)
    with pytest.raises(UsageError, match=needle):
        compose_sweep(["+experiment=rope", "data=text", f"data.path={corpus}"])


def test_user_corpus_is_accepted(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog\n" * 200)
    sweep = compose_sweep(["+experiment=rope", "data=text", f"data.path={corpus}"])
    assert sweep.variant_configs["rope"]["data"] == {"kind": "text", "n_files": 60, "path": str(corpus),
                                                      "val_fraction": 0.1}


def test_conf_dir_is_the_repo_conf():
    assert CONF_DIR == ROOT / "conf" and (CONF_DIR / "sweep.yaml").is_file()
