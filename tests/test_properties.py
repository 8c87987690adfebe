"""Property-based tests (issue 32.7): random command lines and random damage to a sweep dir's files never give
a traceback; bad input (exit 2) writes nothing and starts nothing.

Each example runs the command in this process (tests.helpers.no_process: process starts counted by audit hooks,
files written listed). A command line that passes every check that starts nothing stops where the task's import
probe would start (TaskCheck raises ProbeReached), so a valid random line costs no process either; the checks
before it (Hydra composition, schemas, seeds, names, paths, the plan, the task's validate hook) all run for
real. The fast tier draws a few dozen examples (sized for a 2-core CI); SWEEPER_PROPERTY_EXAMPLES raises it.
"""
from __future__ import annotations

import json
import os
import shutil
import string
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sweeper.config.sweep as config_sweep
from sweeper.cli.journal import main as journal_main
from sweeper.cli.report import main as report_main
from sweeper.cli.resume import main as resume_main
from sweeper.cli.sweep import main as sweep_main
from sweeper.run.files.hashing import stable_hash
from sweeper.run.files.rundir import RunDir
from tests.helpers.commands import TINY
from tests.helpers.no_process import run_in_process
from tests.helpers.synthetic_sweep import write_sweep

EXAMPLES = int(os.environ.get("SWEEPER_PROPERTY_EXAMPLES", "30"))
FAST = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize="SWEEPER_PROPERTY_EXAMPLES" not in os.environ,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)


class ProbeReached(BaseException):
    """The command line passed every check that starts nothing: the task's probe would start here."""


class NoProbe:
    def __init__(self, *args, **kwargs):
        raise ProbeReached


KEYS = [
    "seeds",
    "train.steps",
    "train.lr",
    "train.grad_clip",
    "train.device",
    "train.deterministic",
    "model.d_model",
    "model.n_heads",
    "model.rope_base",
    "model.dropout",
    "model.pos_encoding",
    "data",
    "data.path",
    "data.val_fraction",
    "data.n_files",
    "health.interval",
    "health.thresholds.ema_beta",
    "sweeper.dir",
    "sweeper.dry_run",
    "sweeper.max_runs",
    "sweeper.preflight",
    "sweeper.one_change",
    "sweeper.journal",
    "sweeper.adaptive.start",
    "launcher",
    "launcher.grace_s",
    "launcher.max_parallel",
    "launcher.devices",
    "launcher.cores",
    "launcher.max_log_mb",
    "launcher.stall_s",
    "launcher.stall_kill",
    "launcher.threads_per_run",
    "experiment.name",
    "experiment.baseline",
    "experiment.metric",
    "experiment.min_effect",
    "experiment.variants.nope",
    "experiment.variants.new",
    "experiment.lower_is_better",
    "task.entry",
    "task.cwd",
    "task.command",
    "task.preload",
    "hydra.searchpath",
    "model",
    "train",
    "nokey",
    "a.b.c",
]
VALUES = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(
        [
            "true",
            "false",
            "null",
            "inf",
            "-inf",
            "nan",
            ".inf",
            "0-3",
            "3-1",
            "adaptive",
            "[]",
            "[0,0]",
            "[1,2",
            "{a: 1}",
            "${train.steps}",
            "${nokey}",
            "'quoted'",
            '"x,y"',
            "a,b",
            "~",
            "???",
            "",
            "text",
            "cuda",
            "local",
            "slurm",
            "/no/such/dir",
            "x" * 300,
            "é",
            "a b",
            "\\n",
            "1e999",
        ]
    ),
    st.text(alphabet=string.printable + "éß€\u0000", max_size=20),
    st.lists(st.integers(-3, 10), max_size=4).map(lambda v: "[" + ",".join(map(str, v)) + "]"),
)
OVERRIDE = st.one_of(
    st.tuples(
        st.sampled_from(["", "", "", "+", "++", "~"]),
        st.sampled_from(KEYS),
        st.sampled_from(["=", "=", "==", ""]),
        VALUES,
    ).map(lambda t: f"{t[0]}{t[1]}{t[2]}{t[3]}"),
    st.text(alphabet=string.printable, max_size=25),
    st.sampled_from(["--cfgg", "--config-dir", "-cd", "--config-dir=/no/such", "--debugx", "-h2", "=1", "+=", "~"]),
)


def _one_line_or_clean(result, prog: str) -> None:
    said = result.stdout + result.stderr
    assert "Traceback" not in said and "internal error" not in said, said[-2000:]
    if result.code != 0:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"{prog}: "), result.stderr[-2000:]


@pytest.mark.slow
@FAST
@given(st.lists(OVERRIDE, min_size=1, max_size=5), st.booleans())
def test_random_command_lines_never_give_a_traceback_and_bad_ones_start_and_write_nothing(overrides, rope):
    argv = (["+experiment=rope", "~experiment.variants.rope_frozen_qk", *TINY] if rope else []) + overrides
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        mp.setattr(config_sweep, "TaskCheck", NoProbe)
        try:
            result = run_in_process(sweep_main, argv, cwd=Path(tmp))
        except ProbeReached:  # a valid line: nothing written before the probe
            assert not any(Path(tmp).iterdir()), list(Path(tmp).rglob("*"))
            return
        _one_line_or_clean(result, "sweeper")
        assert result.code in (0, 1, 2), result.code
        if result.code == 2:
            assert result.started == [] and result.written == [], (result.started, result.written)


# -- damaged sweep dirs -------------------------------------------------------------------------------------------

RUN_FILES = ["status.json", "summary.json", "metrics.jsonl", "config.yaml", "health.json", "env.json", "stdout.log"]
TARGETS = ["sweep.json", "../journal.jsonl", "looks.json"] + [
    f"runs/{v}/seed_{k}/{f}" for v in ("a", "b") for k in (0, 1) for f in RUN_FILES
]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
DAMAGE = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("bytes"), st.binary(max_size=64)),
    st.tuples(st.just("insert"), st.tuples(st.floats(0, 1), st.binary(min_size=1, max_size=16))),
    st.tuples(st.just("flip"), st.floats(0, 1)),
    st.tuples(st.just("json"), JSON),
    st.tuples(
        st.just("field"),
        st.tuples(
            st.sampled_from(
                [
                    "status",
                    "final",
                    "seed",
                    "runs",
                    "experiment",
                    "step",
                    "variants",
                    "launch",
                    "owner",
                    "jobs",
                    "looks",
                ]
            ),
            JSON,
        ),
    ),
    st.sampled_from([("delete", None), ("dir", None), ("empty", None), ("latin1", None)]),
)


def damage(path: Path, how) -> None:
    kind, arg = how
    data = path.read_bytes() if path.is_file() else b""
    if kind == "truncate":
        path.write_bytes(data[: int(len(data) * arg)])
    elif kind == "bytes":
        path.write_bytes(arg)
    elif kind == "insert":
        at = int(len(data) * arg[0])
        path.write_bytes(data[:at] + arg[1] + data[at:])
    elif kind == "flip" and data:
        at = min(int(len(data) * arg), len(data) - 1)
        path.write_bytes(data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :])
    elif kind == "json":
        path.write_text(json.dumps(arg))
    elif kind == "field":
        try:
            obj = json.loads(data or b"{}")
        except ValueError:
            obj = {}
        if isinstance(obj, dict):
            obj[arg[0]] = arg[1]
        path.write_text(json.dumps(obj))
    elif kind == "delete":
        path.unlink(missing_ok=True)
    elif kind == "dir":
        path.unlink(missing_ok=True)
        path.mkdir()
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "latin1":
        path.write_bytes("é\xff".encode("latin-1") + data)


@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pristine") / "sweeps" / "s"
    write_sweep(root, {"a": [1.0, 1.1], "b": [1.3, 1.5]})
    manifest = json.loads((root / "sweep.json").read_text())  # resumable: a task, the configs' own hashes
    manifest["task"] = {"entry": "sweeper.train:main", "cwd": str(root)}
    for entry in manifest["runs"]:
        entry["config_hash"] = stable_hash(RunDir(root / entry["run_dir"]).read_config())
    (root / "sweep.json").write_text(json.dumps(manifest))
    (root.parent / "journal.jsonl").write_text(json.dumps({"id": "x", "sweep": "s"}) + "\n")
    (root / "looks.json").write_text(json.dumps({"design": {}, "looks": [], "states": {}}))
    return root


COMMANDS = {
    "report": (report_main, lambda d: [str(d), "--no-plots", "--resamples", "100"], "sweeper.report"),
    "journal": (journal_main, lambda d: ["--journal", str(d.parent), "list"], "sweeper.journal"),
    "resume": (resume_main, lambda d: [str(d)], "sweeper.resume"),
}


class LaunchReached(BaseException):
    """sweeper.resume read the sweep dir and would launch its runs now."""


@pytest.mark.slow
@FAST
@given(data=st.data())
def test_damaged_sweep_dir_files_are_named_never_a_traceback(finished_sweep, data):
    target = data.draw(st.sampled_from(TARGETS), label="file")
    how = data.draw(DAMAGE, label="damage")
    command = data.draw(st.sampled_from(sorted(COMMANDS)), label="command")
    main, args, prog = COMMANDS[command]
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        root = Path(tmp) / "sweeps" / "s"
        shutil.copytree(finished_sweep.parent, root.parent)
        damage(root / target, how)

        def reached(*a, **k):
            raise LaunchReached

        mp.setattr("sweeper.cli.resume.run_to_end", reached)
        try:
            result = run_in_process(main, args(root), cwd=Path(tmp))
        except LaunchReached:
            return
        _one_line_or_clean(result, prog)
        assert result.code in (0, 1, 2), result.code


OPTIONS = [
    "--against",
    "--any-experiment",
    "--no-plots",
    "--alpha",
    "--min-seeds",
    "--resamples",
    "--seed",
    "--baseline",
    "--metric",
    "--journal",
    "--higher-is-better",
    "--lower-is-better",
    "--since",
    "--until",
    "--experiment",
    "--variant",
    "list",
    "search",
    "show",
    "conclude",
    "status",
    "cancel",
    "--debugx",
    "-h2",
]
ARG = st.one_of(
    st.sampled_from(OPTIONS),
    st.sampled_from(["DIR", "DIR", "0", "-1", "1e9", "nan", "a", "b", "", "2026-13-45", "x" * 300]),
    st.text(alphabet=string.printable + "é\u0000", max_size=12),
)
OTHERS = {
    "report": (report_main, "sweeper.report"),
    "journal": (journal_main, "sweeper.journal"),
    "resume": (resume_main, "sweeper.resume"),
}


@FAST
@given(st.sampled_from(sorted(OTHERS)), st.lists(ARG, max_size=6))
def test_random_arguments_to_every_other_command_never_give_a_traceback(finished_sweep, command, argv):
    main, prog = OTHERS[command]
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        root = Path(tmp) / "sweeps" / "s"
        shutil.copytree(finished_sweep.parent, root.parent)

        def reached(*a, **k):
            raise LaunchReached

        mp.setattr("sweeper.cli.resume.run_to_end", reached)
        try:
            result = run_in_process(main, [str(root) if a == "DIR" else a for a in argv], cwd=Path(tmp))
        except (LaunchReached, SystemExit):  # a launch, or argparse's --help (exit 0)
            return
        _one_line_or_clean(result, prog)
        assert result.code in (0, 1, 2), result.code
