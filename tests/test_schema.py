"""Every key of every typed group (sweeper.*, launcher.* local and slurm, task.*, experiment.*, model.*, data.*,
train.*, health.*): a wrong type and an out-of-range value are each one line naming the key, exit 2, nothing
written; the schema is the one source of keys and defaults (`--cfg` shows them all); a user's own group is typed
through a `sweeper.schemas` entry point, and a broken one is named.

    python -m pytest -q tests/test_schema.py
"""
from __future__ import annotations

import dataclasses
import os
import textwrap
import typing

import pytest
import yaml

from sweeper.backends.local.schema import LocalLauncherConf, PoolConf
from sweeper.backends.slurm.schema import SlurmLauncherConf
from sweeper.cli.sweep import prepare
from sweeper.config.fields import build
from sweeper.config.schema import SweeperConf, TaskConf
from sweeper.errors import UsageError
from sweeper.run.files.experiment import Experiment
from sweeper.train.config import HealthConfig, ModelConfig, StdlibData, TextData, TrainConfig
from tests.helpers.commands import ROOT, run_sweeper, sweeper_cli

BASE = ["+experiment=rope"]
# (prefix, schema, overrides that select it): every field of each is in the tables below
GROUPS = [("sweeper", SweeperConf, []), ("launcher", LocalLauncherConf, []),
          ("launcher", SlurmLauncherConf, ["launcher=slurm"]), ("task", TaskConf, ["task=custom"]),
          ("experiment", Experiment, []), ("model", ModelConfig, []), ("data", StdlibData, []),
          ("data", TextData, ["data=text", f"data.path={ROOT / 'README.md'}"]), ("train", TrainConfig, []),
          ("health", HealthConfig, [])]
EXISTING_EXPERIMENT_KEYS = {"name", "baseline", "metric", "lower_is_better", "variants", "min_effect"}   # in rope.yaml


def wrong_type(hint) -> str:
    """A value of the wrong type for a field annotated `hint`, in override syntax."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    inner = args[0] if typing.get_origin(hint) is typing.Union and len(args) == 1 else hint
    origin = typing.get_origin(inner)
    if origin is list:
        return "{a: 1}"           # (a scalar is a one-item list for launcher.devices / launcher.cores)
    if origin is dict:
        return "[x]"
    return {bool: "maybe", int: "abc", float: "abc", str: "[1,2]"}.get(inner, "{a: 1}")


def override(prefix: str, key: str, value: str) -> str:
    plus = "+" if prefix == "experiment" and key not in EXISTING_EXPERIMENT_KEYS else ""
    return f"{plus}{prefix}.{key}={value}"


TYPE_CASES = [pytest.param(prefix, f.name, extra + [override(prefix, f.name, wrong_type(hint))],
                           id=f"{cls.__name__}.{f.name}")
              for prefix, cls, extra in GROUPS
              for f in dataclasses.fields(cls)
              for hint in [typing.get_type_hints(cls)[f.name]]
              if not (cls is TaskConf and f.name == "command") and not dataclasses.is_dataclass(hint)] + [
    pytest.param("task", "command", ["task=custom", "task.command={a: 1}"], id="TaskConf.command")]

# Out-of-range values, one for every key with a range or choice (independent of the schema's own rules).
RANGE_CASES = [
    ("sweeper.preflight", ["sweeper.preflight=later"], "accepted values are off, warn, stop"),
    ("sweeper.max_runs", ["sweeper.max_runs=0"], "must be a positive integer"),
    ("sweeper.one_change", ["sweeper.one_change=sometimes"], "accepted values are warn, error, off"),
    ("health.thresholds", ["+health.thresholds.no_such=1"], "health.thresholds.no_such: unknown threshold; accepted:"),
    ("launcher.runs_per_device", ["launcher.runs_per_device=0"], "must be a positive integer"),
    ("launcher.ranks_per_run", ["launcher.ranks_per_run=0"], "must be an integer from 1 to 64"),
    ("launcher.ranks_per_run", ["launcher=slurm", "launcher.ranks_per_run=65"], "must be an integer from 1 to 64"),
    ("launcher.max_parallel", ["launcher.max_parallel=0"], "must be a positive integer or null"),
    ("launcher.threads_per_run", ["launcher.threads_per_run=-2"], "must be a positive integer or null"),
    ("launcher.cores", ["launcher.cores=[-1]"], "must be a non-empty list of distinct CPU core ids"),
    ("launcher.max_retries", ["launcher.max_retries=-1"], "must be an integer >= 0"),
    ("launcher.retry_backoff_s", ["launcher.retry_backoff_s=-0.5"], "must be a number of seconds >= 0"),
    ("launcher.crash_loop_after", ["launcher.crash_loop_after=-1"], "must be an integer >= 0"),
    ("launcher.grace_s", ["launcher.grace_s=-1"], "must be a number of seconds >= 0"),
    ("launcher.max_log_mb", ["launcher.max_log_mb=0"], "must be a positive number of MiB or null"),
    ("launcher.stall_s", ["launcher.stall_s=-1"], "must be a number of seconds >= 0"),
    ("launcher.name", ["launcher.name=kubernetes"], "accepted values are local, slurm"),
    ("launcher.timeout_min", ["launcher=slurm", "launcher.timeout_min=0"], "must be a positive integer"),
    ("launcher.cpus_per_task", ["launcher=slurm", "launcher.cpus_per_task=0"], "must be a positive integer or null"),
    ("launcher.gpus_per_node", ["launcher=slurm", "launcher.gpus_per_node=-1"], "must be a non-negative integer"),
    ("launcher.mem_gb", ["launcher=slurm", "launcher.mem_gb=0"], "must be a positive number of GB or null"),
    ("launcher.cpus_per_gpu", ["launcher=slurm", "launcher.cpus_per_gpu=0"], "must be a positive integer or null"),
    ("launcher.gpus_per_task", ["launcher=slurm", "launcher.gpus_per_task=0"], "must be a positive integer or null"),
    ("launcher.array_parallelism", ["launcher=slurm", "launcher.array_parallelism=0"], "must be a positive integer"),
    ("launcher.signal_delay_s", ["launcher=slurm", "launcher.signal_delay_s=0"], "must be a positive integer"),
    (
        "launcher.signal_delay_s",
        ["launcher=slurm", "launcher.timeout_min=2", "launcher.signal_delay_s=120"],
        "must be shorter than launcher.timeout_min=2 minutes",
    ),
    ("launcher.max_num_timeout", ["launcher=slurm", "launcher.max_num_timeout=-1"], "must be a non-negative integer"),
    ("launcher.stop_grace_s", ["launcher=slurm", "launcher.stop_grace_s=0"], "must be a positive number of seconds"),
    ("launcher.poll_s", ["launcher=slurm", "launcher.poll_s=-1"], "must be a positive number of seconds"),
    ("task.entry", ["task.entry='not an entry'"], "expected an entry point package.module:function"),
    ("task.command", ["task=custom", "task.command=[]"], "task: set exactly one of task.entry"),
    ("task.cwd", ["task.cwd=/no/such/dir"], "no such directory"),
    ("task.validate", ["task.validate=nocolon"], "expected an entry point"),
    ("task.preflight", ["task.preflight=no-colon"], "expected an entry point"),
    ("task.audit", ["task.audit=no-colon"], "expected an entry point"),
    ("task.preload", ["task.preload=[train/loop]"], "must be a list of module names"),
    ("task.args", ["task=custom", "task.command=[prog]", "task.args=every"], "accepted values are none"),
    (
        "task.metrics",
        ["task=custom", "task.command=[prog]", "task.metrics=[out.txt]"],
        "'out.txt' is not stdout or a .json, .jsonl or .csv file",
    ),
    ("task.metrics_prefix", ["task.metrics_prefix=M"], "task.metrics_prefix: only with task.command"),
    ("task.config_file", ["task.config_file=own.yaml"], "task.config_file: only with task.command"),
    ("experiment.design", ["+experiment.design=maybe"], "accepted values are auto, paired, independent"),
    ("experiment.name", ["experiment.name=a/b"], "must be a name of letters, digits"),
    ("experiment.baseline", ["experiment.baseline=nosuch"], "is not one of the variants: rope, nope, rope_frozen_qk"),
    ("experiment.metric", ["experiment.metric=''"], "must be a metric name"),
    ("experiment.variants", ["experiment.variants=null"], "must map variant names to lists of overrides"),
    ("experiment.min_effect", ["experiment.min_effect=0"], "must be a positive number"),
    ("experiment.resources", ["+experiment.resources={nope: {ranks_per_run: 0}}"], "must be an integer from 1 to 64"),
    ("experiment.secondary_metrics", ["+experiment.secondary_metrics={acc: up}"], "lower or higher"),
    ("experiment.silence", ["+experiment.silence={nosuch: why}"], "must map names of checks across runs "
                                                                   "(seeds_no_effect, change_no_effect"),
    ("model.d_model", ["model.d_model=0"], "must be a positive integer"),
    ("model.n_layers", ["model.n_layers=0"], "must be a positive integer"),
    ("model.n_heads", ["model.n_heads=-1"], "must be a positive integer"),
    ("model.context", ["model.context=0"], "must be a positive integer"),
    ("model.pos_encoding", ["model.pos_encoding=alibi"], "accepted values are rope, none"),
    ("model.rope_impl", ["model.rope_impl=cuda"], "accepted values are auto, torch, triton"),
    ("model.rope_base", ["model.rope_base=0"], "must be positive"),
    ("model.mlp_ratio", ["model.mlp_ratio=0"], "must be a positive integer"),
    ("model.dropout", ["model.dropout=1.0"], "accepted is 0 <= dropout < 1"),
    ("model.n_heads", ["model.n_heads=3"], "model.d_model=128 must be divisible by model.n_heads=3"),
    ("model.n_heads", ["model.d_model=12", "model.n_heads=4"], "= 3: RoPE needs an even head dim"),
    ("data.kind", ["data.kind=web"], "accepted values are stdlib, text"),
    ("data.n_files", ["data.n_files=0"], "must be a positive integer"),
    ("data.val_fraction", ["data.val_fraction=0.5"], "accepted is 0 < val_fraction < 0.5"),
    ("data.path", ["data=text", "data.path=/no/such/corpus.txt"], "no such file"),
    (
        "data.val_fraction",
        ["data=text", f"data.path={ROOT / 'README.md'}", "data.val_fraction=0"],
        "accepted is 0 < val_fraction < 0.5",
    ),
    (
        "data.kind",
        ["data=text", f"data.path={ROOT / 'README.md'}", "data.kind=web"],
        "accepted values are stdlib, text",
    ),
    ("train.steps", ["train.steps=0"], "must be a positive integer"),
    ("train.batch_size", ["train.batch_size=0"], "must be a positive integer"),
    ("train.lr", ["train.lr=0"], "must be positive"),
    ("train.weight_decay", ["train.weight_decay=-0.1"], "must be >= 0"),
    ("train.warmup_steps", ["train.warmup_steps=-1"], "must be >= 0"),
    ("train.grad_clip", ["train.grad_clip=-1"], "must be >= 0"),
    ("train.log_interval", ["train.log_interval=0"], "must be a positive integer"),
    ("train.eval_interval", ["train.eval_interval=0"], "must be a positive integer"),
    ("train.eval_batches", ["train.eval_batches=0"], "must be a positive integer"),
    ("train.ckpt_interval", ["train.ckpt_interval=-5"], "must be >= 0"),
    ("train.keep_checkpoints", ["train.keep_checkpoints=1"], "keep at least 2"),
    ("train.device", ["train.device=tpu"], "accepted values are auto, cpu, cuda"),
    ("health.interval", ["health.interval=0"], "must be a positive integer"),
]


def refused(args: list[str], tmp_path, monkeypatch) -> str:
    """The one-line UsageError prepare() (everything `python -m sweeper` checks before it writes) raises."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as e:
        prepare(BASE + args + [f"sweeper.dir={tmp_path / 'sweep'}"])
    message = str(e.value)
    assert len(message.splitlines()) == 1, message
    assert list(tmp_path.iterdir()) == []  # no sweep dir, no sweeps/ folder
    return message


# The keys without a range or choice (any value of their type is accepted): booleans, free text, lists of ids.
WITHOUT_RANGE = (
    {
        "sweeper.dir",
        "sweeper.dry_run",
        "sweeper.extend",
        "sweeper.audit",
        "sweeper.report",
        "sweeper.tensorboard",
        "sweeper.determinism_probe",
        "launcher.devices",
        "launcher.cpu_only",
        "launcher.stall_kill",
        "sweeper.baseline_first",
        "sweeper.journal",
        "sweeper.reuse",
        "sweeper.reuse_from",
        "experiment.hypothesis",
        "experiment.notes",
        "experiment.controls",
        "experiment.bundles",
        "experiment.confirm_direction",
    }
    | {
        f"launcher.{k}"
        for k in (
            "wait",
            "partition",
            "account",
            "qos",
            "gres",
            "mem_per_gpu",
            "mem_per_cpu",
            "constraint",
            "exclude",
            "comment",
            "job_name",
            "additional_parameters",
            "setup",
            "stderr_to_stdout",
            "submitit_folder",
        )
    }
    | {"experiment.lower_is_better", "train.deterministic", "health.preflight"}
)
TRAINER = {"model": ModelConfig, "data": StdlibData, "train": TrainConfig, "health": HealthConfig}


def test_the_tables_cover_every_key_of_every_group():
    keys = {
        f"{prefix}.{f.name}"
        for prefix, cls, _ in GROUPS
        for f in dataclasses.fields(cls)
        if not dataclasses.is_dataclass(typing.get_type_hints(cls)[f.name])
    }  # nested: sweeper.adaptive.*
    assert {f"{p.values[0]}.{p.values[1]}" for p in TYPE_CASES} == keys
    ranged = {key for key, _, _ in RANGE_CASES}
    assert keys - ranged == WITHOUT_RANGE  # every key with a range has an out-of-range case
    for key in WITHOUT_RANGE & {
        f"{p}.{f.name}" for p, cls, _ in GROUPS if p in TRAINER for f in dataclasses.fields(cls)
    }:
        prefix, name = key.split(".")  # the trainer's keys without a range are its booleans
        assert typing.get_type_hints(TRAINER[prefix])[name] is bool, key


TRAINER_RANGE_CASES = [c for c in RANGE_CASES if c[0].split(".")[0] in TRAINER and c[0] != "data.path"]


@pytest.mark.parametrize("key, args, says", TRAINER_RANGE_CASES, ids=[" ".join(c[1]) for c in TRAINER_RANGE_CASES])
def test_each_trainer_group_checks_its_own_ranges(key, args, says):
    """The group's dataclass alone refuses the value (its check()), with the message the sweep prints."""
    from sweeper.train.config import ConfigError

    prefix = key.split(".")[0]
    cls = TextData if "data=text" in args else TRAINER[prefix]
    values = {}
    for a in (a.lstrip("+") for a in args if a.lstrip("+").startswith(f"{prefix}.") and not a.startswith("data.path=")):
        path, value = a.split("=", 1)
        _, name, *sub = path.split(".")  # +health.thresholds.NAME=v -> thresholds={NAME: v}
        values[name] = {sub[0]: yaml.safe_load(value)} if sub else yaml.safe_load(value)
    cls().check(prefix)  # the defaults pass
    with pytest.raises(ConfigError) as e:
        cls(**values).check(prefix)
    assert key in str(e.value) and says in str(e.value), str(e.value)


@pytest.mark.slow
@pytest.mark.parametrize("prefix, key, args", TYPE_CASES)
def test_a_wrong_type_is_one_line_naming_the_key(prefix, key, args, tmp_path, monkeypatch):
    message = refused(args, tmp_path, monkeypatch)
    named = f"{prefix}.{key}"
    assert message.startswith(f"{named}=") or message.startswith(f"{named} ") or f"'{named}'" in message, message
    assert "expected" in message or "must" in message or "accepted" in message, message


@pytest.mark.slow
@pytest.mark.parametrize("key, args, says", RANGE_CASES, ids=[f"{c[0]}:{c[1][-1]}" for c in RANGE_CASES])
def test_an_out_of_range_value_is_one_line_naming_the_key(key, args, says, tmp_path, monkeypatch):
    message = refused(args, tmp_path, monkeypatch)
    assert key in message and says in message, message


@pytest.mark.parametrize(
    "args, line",
    [
        (["sweeper.report=maybe"], "sweeper.report='maybe': expected a boolean (true or false)"),
        (["sweeper.dry_run=maybe"], "sweeper.dry_run='maybe': expected a boolean (true or false)"),
        (["sweeper.dry_run=2"], "sweeper.dry_run=2: expected a boolean (true or false)"),
        (["train.steps=abc"], "train.steps='abc': expected an integer"),
        (["launcher.max_parallel=0"], "launcher.max_parallel=0: must be a positive integer or null"),
        (["launcher.cores=[0,x]"], "launcher.cores=[0, 'x']: must be a non-empty list of "
                                   "distinct CPU core ids, e.g. [0,1,2,3], or null (every core this process may use)"),
        (["launcher=slurm", "launcher.wait=maybe"], "launcher.wait='maybe': expected a boolean (true or false)"),
        (["sweeper.decision.alpha=1.5"], "sweeper.decision.alpha=1.5: accepted values are between 0 and 1, e.g. 0.05"),
        (["sweeper.decision.min_seeds=1"], "sweeper.decision.min_seeds=1: must be an integer >= 2 (a t-test needs at "
                                           "least 2 seeds per arm)"),
        (
            ["sweeper.typo=1"],
            "unknown config key 'sweeper.typo'; keys of sweeper are: adaptive, audit, baseline_first, decision, "
            "determinism_probe, dir, dry_run, extend, journal, max_runs, one_change, "
            "preflight, report, reuse, reuse_from, tensorboard",
        ),
        (
            ["+launcher.gpus=2"],
            "unknown config key 'launcher.gpus'; keys of launcher are: cores, cpu_only, "
            "crash_loop_after, devices, grace_s, max_log_mb, max_parallel, max_retries, name, "
            "ranks_per_run, retry_backoff_s, runs_per_device, stall_kill, stall_s, threads_per_run",
        ),
    ],
)
def test_the_cli_prints_one_line_exit_2_and_writes_nothing(args, line, tmp_path):
    real = args == ["sweeper.report=maybe"]           # one case through `python -m sweeper`, the rest in process
    res = sweeper_cli(*BASE, *args, f"sweeper.dir={tmp_path / 's'}", cwd=tmp_path, real=real)
    assert (res.code, res.stderr, res.stdout) == (2, f"sweeper: error: {line}\n", "")
    assert list(tmp_path.iterdir()) == [] and res.started in ([], None)


def test_cfg_prints_every_key_of_every_schema_with_its_default():
    proc = run_sweeper(*BASE, "--cfg")
    assert proc.returncode == 0, proc.stderr
    cfg = yaml.safe_load(proc.stdout)
    for prefix, cls, extra in GROUPS:
        if extra or prefix == "experiment":
            continue
        defaults = dataclasses.asdict(cls())
        if prefix == "task":  # the built-in trainer's task sets its hooks
            defaults.update(
                entry="sweeper.train:main",
                validate="sweeper.train.checks:validate",
                preflight="sweeper.train.preflight:preflight_config",
            )
        if prefix == "sweeper":  # rope.yaml's own first look and spending (seeds=adaptive)
            defaults["adaptive"].update(start=3, spending="pocock")
        if prefix == "train":  # rope.yaml's first-run length (bench_first_run.py)
            defaults["steps"] = 100
        assert cfg[prefix] == defaults, prefix
    proc = run_sweeper(*BASE, "launcher=slurm", "data=text", "--cfg")
    cfg = yaml.safe_load(proc.stdout)
    assert cfg["launcher"] == dataclasses.asdict(SlurmLauncherConf()) and cfg["data"] == dataclasses.asdict(TextData())


def test_from_dict_validates_an_old_manifests_launcher_as_composition_does():
    assert LocalLauncherConf.from_dict({"name": "local", "devices": [5, 3], "max_parallel": 2}).devices == ["5", "3"]
    for bad, says in [
        ({"max_parallel": 0}, "launcher.max_parallel=0: must be a positive integer or null"),
        ({"cpu_only": "maybe"}, "launcher.cpu_only='maybe': expected a boolean (true or false)"),
        ({"cores": "x"}, "launcher.cores=['x']: must be a non-empty list of distinct CPU core ids"),
    ]:
        with pytest.raises(UsageError) as e:
            LocalLauncherConf.from_dict(bad)
        assert str(e.value).startswith(says), str(e.value)
    with pytest.raises(
        UsageError, match=r"^hydra\.launcher\.grace_s=-1: must be a number of seconds >= 0 \(not inf\)$"
    ):
        build(PoolConf, {"grace_s": -1}, "hydra.launcher")
    with pytest.raises(UsageError, match=r"^launcher\.grace_s=inf: must be a number of seconds >= 0 \(not inf\)$"):
        build(PoolConf, {"grace_s": float("inf")}, "launcher")  # Ctrl-C would never escalate to SIGKILL


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, key, value",
    [
        (["launcher.devices=3,5"], "devices", ["3", "5"]),  # Hydra alone would read a sweep over 3 and 5
        (["launcher.devices='3,5'"], "devices", ["3", "5"]),
        (["launcher.devices=3"], "devices", ["3"]),
        (["launcher.devices=GPU-1a,GPU-2b"], "devices", ["GPU-1a", "GPU-2b"]),
        (["launcher.cores=0,1"], "cores", [0, 1]),
        (['launcher.cores="0, 1"'], "cores", [0, 1]),
        (["launcher.cores=0"], "cores", [0]),
        (["launcher.cores=[0,1]"], "cores", [0, 1]),
        (["launcher.cores=null"], "cores", None),
    ],
)
def test_the_command_line_takes_the_list_forms_from_dict_takes(args, key, value):
    from sweeper.config.sweep import compose_sweep

    assert compose_sweep(BASE + args).launcher[key] == value
    written = args[0].split("=", 1)[1].strip("'\"")
    given = written if "," in written and not written.startswith("[") else yaml.safe_load(written)
    assert getattr(LocalLauncherConf.from_dict({key: given}), key) == value


@pytest.mark.parametrize(
    "args, line",
    [
        (["launcher.cores=a,b"], "launcher.cores=['a', 'b']: must be a non-empty list of "
                                 "distinct CPU core ids, e.g. [0,1,2,3], or null (every core this process may use)"),
        (
            ["launcher.cores=[[0,1]]"],
            "launcher.cores=[[0, 1]]: must be a non-empty list of "
            "distinct CPU core ids, e.g. [0,1,2,3], or null (every core this process may use)",
        ),
        (
            ["launcher.devices=[[3],{a: 1}]"],
            "launcher.devices=[[3], {'a': 1}]: must be a list of GPU ids, e.g. [0,2], or null",
        ),
        (
            ["launcher=slurm", "launcher.devices=3,5"],
            "unknown config key 'launcher.devices'; keys of launcher are: "
            + ", ".join(sorted(f.name for f in dataclasses.fields(SlurmLauncherConf))),
        ),
        (
            ["train.steps=1,2"],
            "train.steps=1,2: a comma-separated value is a Hydra sweep, which python -m sweeper does "
            "not run (variants go in the experiment); write a list as train.steps=[1,2] or a string "
            "as train.steps='1,2'",
        ),
    ],
)
def test_a_comma_list_elsewhere_is_one_line(args, line, tmp_path):
    res = sweeper_cli(*BASE, *args, f"sweeper.dir={tmp_path / 's'}", cwd=tmp_path, real=args == ["train.steps=1,2"])
    assert (res.code, res.stderr, res.stdout) == (2, f"sweeper: error: {line}\n", "")
    assert list(tmp_path.iterdir()) == [] and res.started in ([], None)


@pytest.mark.parametrize(
    "yaml_text, line",
    [
        ("sweeper: {dry_run: 1}", "sweeper.dry_run=1: expected a boolean (true or false) (set in a config file)"),
        (
            "train: {deterministic: 'yes'}",
            "train.deterministic='yes': expected a boolean (true or false) (set in a config file)",
        ),
        ("health: {preflight: 0}", "health.preflight=0: expected a boolean (true or false) (set in a config file)"),
        (
            "launcher: {cpu_only: 'true'}",
            "launcher.cpu_only='true': expected a boolean (true or false) (set in a config file)",
        ),
        ("experiment: {lower_is_better: 1}", "experiment.lower_is_better=1: expected a boolean (true or false) (in "),
    ],
)
def test_a_boolean_in_an_experiment_file_is_true_or_false_too(yaml_text, line, tmp_path):
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "strict.yaml").write_text(
        f"# @package _global_\ndefaults: [rope]\n{yaml_text}\n"
    )
    res = sweeper_cli("--config-dir", "conf", "+experiment=strict", "sweeper.dry_run=true", cwd=tmp_path,
                      real=yaml_text.startswith("sweeper:"))   # one case through `python -m sweeper`
    assert (res.code, res.stdout) == (2, "") and res.stderr.startswith(f"sweeper: error: {line}"), res.stderr
    assert len(res.stderr.splitlines()) == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["conf"]
    assert res.started in ([], None)


def test_from_dict_takes_booleans_only():
    with pytest.raises(UsageError, match=r"^launcher\.cpu_only=1: expected a boolean \(true or false\)$"):
        LocalLauncherConf.from_dict({"cpu_only": 1})
    assert LocalLauncherConf.from_dict({"cpu_only": True}).cpu_only is True


def test_preflight_false_in_yaml_reads_as_off():
    assert build(SweeperConf, {"preflight": False}, "sweeper").preflight == "off"


USER_SCHEMA = """
from dataclasses import dataclass

@dataclass
class Adam:
    lr: float = 0.001     # learning rate
    betas: int = 2

def register(cs):
    cs.store(group="opt", name="adam", node=Adam)
"""
USER_EXPERIMENT = """\
# @package _global_
defaults:
  - /opt: adam
  - override /task: custom
task: {command: [python, toy.py]}
experiment: {name: toy, baseline: a, metric: loss, lower_is_better: true, variants: {a: [], b: [opt.lr=0.1]}}
"""


def user_entry_point(root, name: str, target: str, module_text: str) -> dict:
    """A distribution on PYTHONPATH whose `sweeper.schemas` entry point is `name = target`."""
    (root / "site").mkdir(exist_ok=True)
    (root / "site" / f"{target.split(':')[0]}.py").write_text(module_text)
    info = root / "site" / f"{name}_schemas-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}-schemas\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[sweeper.schemas]\n{name} = {target}\n")
    return {"PYTHONPATH": os.pathsep.join([str(ROOT), str(root / "site"), os.environ.get("PYTHONPATH", "")])}


@pytest.mark.slow
def test_a_users_group_is_typed_by_its_entry_point(tmp_path):
    env = user_entry_point(tmp_path, "mine", "my_schemas:register", textwrap.dedent(USER_SCHEMA))
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "toy.yaml").write_text(USER_EXPERIMENT)
    (tmp_path / "toy.py").write_text("import sweeper\nrun = sweeper.init()\nrun.finish(loss=1.0)\n")
    args = ["--config-dir", "conf", "+experiment=toy"]
    proc = run_sweeper(*args, "--cfg", cwd=tmp_path, env=env)
    assert proc.returncode == 0 and yaml.safe_load(proc.stdout)["opt"] == {"lr": 0.001, "betas": 2}, proc.stderr
    proc = run_sweeper(*args, "opt.lr=fast", cwd=tmp_path, env=env)
    assert (proc.returncode, proc.stderr) == (2, "sweeper: error: opt.lr='fast': expected a number\n")
    proc = run_sweeper(*args, "sweeper.dry_run=true", cwd=tmp_path, env=env)
    assert proc.returncode == 0 and "experiment toy: 2 variants" in proc.stdout, proc.stderr


def test_a_failing_schema_entry_point_is_named(tmp_path):
    env = user_entry_point(
        tmp_path, "broken", "broken_schemas:register", "def register(cs):\n    raise RuntimeError('no such group')\n"
    )
    proc = run_sweeper(*BASE, f"sweeper.dir={tmp_path / 's'}", cwd=tmp_path, env=env)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        "sweeper: error: config schema entry point sweeper.schemas:broken = "
        "broken_schemas:register failed: RuntimeError: no such group\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]
