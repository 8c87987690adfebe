"""One error boundary per command (issue 32.2): every `python -m sweeper.*` command answers bad input and faults
in one line (exit 2 input, 1 fault), never a traceback unless SWEEPER_DEBUG=1 or --debug. Config files: a YAML
error names the file and the line; a file that is not UTF-8 is named; an experiment file without
`# @package _global_` is told so. In-process where the command has a main(argv), else as a user runs it."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from sweeper.cli.audit import main as audit_main
from sweeper.cli.journal import main as journal_main
from sweeper.cli.report import main as report_main
from sweeper.cli.resume import main as resume_main
from sweeper.cli.slurm import main as slurm_main
from sweeper.cli.sweep import main as sweep_main
from sweeper.errors import os_error_line
from tests.helpers.commands import run_sweeper
from tests.helpers.no_process import run_in_process
from tests.helpers.synthetic_sweep import write_sweep

EXPERIMENT = """\
# @package _global_
experiment:
  name: mine
  baseline: a
  metric: val_loss
  lower_is_better: true
  variants: {a: [], b: [train.steps=3]}
"""
BROKEN = {
    "flow.yaml": (
        "# @package _global_\nexperiment:\n  name: x\n  variants: {a: [x=1, }\n",
        "flow.yaml, line 4: not valid YAML",
    ),
    "twice.yaml": (EXPERIMENT + "  name: again\n", "twice.yaml, line 8: not valid YAML (found duplicate key name"),
    "tab.yaml": ("# @package _global_\nexperiment:\n\tname: x\n", "tab.yaml, line 3: not valid YAML"),
    "nopackage.yaml": (
        EXPERIMENT.replace("# @package _global_\n", "defaults:\n  - override /task: custom\n"),
        "nopackage.yaml has no `# @package _global_` line",
    ),
    "plain.yaml": (EXPERIMENT.replace("# @package _global_\n", ""), "plain.yaml has no `# @package _global_` line"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_experiment_file_is_one_line_naming_the_file_and_line(tmp_path, name):
    text, needle = BROKEN[name]
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / name).write_text(text)
    result = run_in_process(sweep_main, ["--config-dir", "conf", f"+experiment={Path(name).stem}"], cwd=tmp_path)
    assert result.code == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and str(tmp_path / "conf" / "experiment") in lines[0], lines
    assert result.started == [] and result.written == []


def test_an_experiment_file_that_is_not_utf8_is_named(tmp_path):
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "latin.yaml").write_bytes(EXPERIMENT.replace("mine", "m\xe9").encode("latin-1"))
    result = run_in_process(sweep_main, ["--config-dir", "conf", "+experiment=latin"], cwd=tmp_path)
    assert result.code == 2 and "latin.yaml is not UTF-8 text" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "main, argv, needle",
    [
        (report_main, ["--bogus"], "sweeper.report: error: "),
        (report_main, ["DIR", "--alpha", "x"], "argument --alpha: invalid float value: 'x'"),
        (report_main, ["DIR", "--any-experiment"], "--any-experiment applies with --against"),
        (report_main, ["/no/such/sweep"], "sweep dir /no/such/sweep does not exist"),
        (journal_main, ["list", "--since", "yesterday"], "--since 'yesterday': expected a date"),
        (journal_main, ["frobnicate"], "invalid choice: 'frobnicate'"),
        (resume_main, ["/no/such/sweep"], "no readable sweep.json"),
        (resume_main, ["DIR", "train.steps=3"], "accepted arguments after SWEEP_DIR are launcher.KEY=VALUE"),
        (audit_main, ["+experiment=rope", "--mode", "sideways"], "argument --mode: invalid choice: 'sideways'"),
        (audit_main, ["+experiment=rope", "--threads", "0"], "--threads 0: must be a positive integer"),
        (slurm_main, ["status"], "usage: python -m sweeper.slurm status|cancel SWEEP_DIR"),
        (slurm_main, ["status", "DIR"], "slurm.json not found: not a sweep submitted with launcher=slurm"),
        (sweep_main, ["+experiment=rope", "--cfgg"], "unknown option --cfgg"),
    ],
)
def test_every_command_answers_bad_input_in_one_line_exit_2(tmp_path, main, argv, needle):
    sweep = write_sweep(tmp_path / "s", {"a": [1.0, 1.1, 1.2], "b": [1.2, 1.3, 1.4]})
    result = run_in_process(main, [str(sweep) if a == "DIR" else a for a in argv], cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.code == 2, (result.code, result.stderr)
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in result.stderr, lines
    assert result.started == []


def test_a_journal_that_is_not_utf8_is_named(tmp_path):
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "journal.jsonl").write_bytes(b'{"id": "a"}\n\xff\xfe garbage\n')
    result = run_in_process(journal_main, ["list"], cwd=tmp_path)
    assert result.code == 2 and "journal.jsonl: the journal is not UTF-8 text (byte 0xff at offset 12)" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("damage", ["sweep.json", "status.json", "summary.json", "config.yaml", "metrics.jsonl"])
def test_run_files_that_are_not_utf8_are_named_never_a_traceback(tmp_path, damage):
    sweep = write_sweep(tmp_path / "s", {"a": [1.0, 1.1, 1.2], "b": [1.2, 1.3, 1.4]})
    target = sweep / damage if damage == "sweep.json" else sweep / "runs" / "b" / "seed_0" / damage
    target.write_bytes(b"\xff\xfe\x00 not text " + target.read_bytes()[:20])
    result = run_in_process(report_main, [str(sweep), "--no-plots", "--resamples", "200"], cwd=tmp_path)
    assert result.code in (0, 2) and "Traceback" not in result.stderr + result.stdout
    said = result.stdout + result.stderr + ((sweep / "report.md").read_text() if (sweep / "report.md").exists() else "")
    if damage == "metrics.jsonl":  # a damaged metrics line is skipped and counted
        assert "truncated or corrupt line" in said
    else:
        assert f"{target}: " in said and "not UTF-8 text" in said, said


def test_an_os_error_names_what_was_attempted_on_which_path_and_the_fix(tmp_path):
    target = tmp_path / "sweeps" / "x" / "report.md"

    def write(path):
        with open(os.devnull, "w") as f:
            f.write("x")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # f.write() names no file

    try:
        write(target)
    except OSError as e:
        line = os_error_line(e)
    assert line == (
        f"writing {target}: No space left on device; the disk is full: free some space, then run the "
        f"same command again (finished work is kept)"
    )
    try:
        (tmp_path / "file").write_text("x")
        (tmp_path / "file" / "sub").mkdir()
    except OSError as e:
        assert os_error_line(e).startswith(
            f"creating the folder {tmp_path / 'file' / 'sub'}: Not a directory; a part of it is a file"
        )


def test_debug_shows_the_traceback(tmp_path):
    plain = run_sweeper("list", "--since", "x", module="sweeper.journal", cwd=tmp_path)
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "journal.jsonl").write_bytes(b"\xff\n")
    debug = run_sweeper("list", module="sweeper.journal", cwd=tmp_path, env={"SWEEPER_DEBUG": "1"})
    assert "Traceback" in debug.stderr and debug.returncode != 0


@pytest.mark.parametrize(
    "module, argv, code, needle",
    [
        ("sweeper.run", ["x:y", "/no/such/run"], 2, "sweeper.run: error: /no/such/run: no such run dir"),
        ("sweeper.train", ["/no/such/run"], 2, "sweeper.run: error: /no/such/run: no such run dir"),
        ("sweeper.health", ["HEALTH"], 2, "sweeper.health: error: "),
    ],
)
def test_the_run_and_health_commands_are_one_line_too(tmp_path, module, argv, code, needle):
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "health.json").write_bytes(b"\xff{")
    proc = run_sweeper(*[str(tmp_path / "h") if a == "HEALTH" else a for a in argv], module=module, cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == code and len(lines) == 1 and needle in lines[0], proc.stderr
    assert not Path("/no/such/run").exists()


def test_launcher_grace_s_inf_is_refused_everywhere_it_is_read():
    from sweeper.backends.local.schema import LocalLauncherConf, PoolConf
    from sweeper.backends.slurm.schema import SlurmLauncherConf
    from sweeper.config.fields import build
    from sweeper.errors import UsageError

    for cls, key in (
        (LocalLauncherConf, "grace_s"),
        (SlurmLauncherConf, "stop_grace_s"),
        (PoolConf, "stall_s"),
        (PoolConf, "max_log_mb"),
        (SlurmLauncherConf, "mem_gb"),
        (LocalLauncherConf, "retry_backoff_s"),
    ):
        for bad in (float("inf"), float("nan"), float("-inf")):
            with pytest.raises(UsageError, match=rf"^launcher\.{key}=(inf|nan|-inf): "):
                cls.from_dict({key: bad}) if cls is not PoolConf else build(cls, {key: bad}, "launcher")


@pytest.mark.parametrize(
    "main, argv",
    [
        (sweep_main, ["+experiment=rope", "seeds=0", "sweeper.dir=loop/x"]),
        (sweep_main, ["--config-dir", "loop", "+experiment=rope"]),
        (resume_main, ["loop"]),
    ],
)
def test_a_symbolic_link_loop_in_a_path_is_one_line(tmp_path, main, argv):
    (tmp_path / "loop").symlink_to("loop")
    result = run_in_process(main, argv, cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.code == 2 and len(lines) == 1 and "points back at itself" in lines[0], result.stderr
    assert result.started == []
