"""Tasks: a user project names its own code (task.entry / task.command) in its own config dir. A task that cannot
start is one line naming task.<key>, exit 2, at plan time: no sweep dir, nothing launched."""
import sys
import textwrap

import pytest

from sweeper.config.task import TaskSpec, check_task, parse_task
from sweeper.errors import UsageError
from tests.helpers.commands import run_sweeper, sweeper_cli

EXPERIMENT = """\
# @package _global_
defaults:
  - override /task: custom
task:
  command: [python, train_x.py]
experiment:
  name: x
  baseline: a
  metric: loss
  lower_is_better: true
  variants:
    a: []
    b: [lr=0.5]
lr: 0.1
steps: 4
"""


@pytest.fixture
def project(tmp_path):
    """A small user project: conf/experiment/x.yaml (override /task: custom), its script and modules."""
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "x.yaml").write_text(EXPERIMENT)
    (tmp_path / "train_x.py").write_text("import sweeper\nrun = sweeper.init()\nrun.finish(loss=run.config.lr)\n")
    (tmp_path / "mymod.py").write_text(textwrap.dedent("""\
        def main(run):
            return {"loss": run.config.lr}

        def validate(config):
            if config["lr"] > 1:
                raise ValueError(f"lr={config['lr']}: must be at most 1")

        not_a_function = 3
        """))
    (tmp_path / "broken.py").write_text("import no_such_module_anywhere\ndef main(run): pass\n")
    return tmp_path


def sweeper_in(project, *args):
    return run_sweeper("--config-dir", "conf", "+experiment=x", *args, cwd=project)


def in_own_process(args) -> bool:
    """A case that imports the user's modules into the sweeper's own process (a validate or preflight hook, a
    preload list) runs as `python -m sweeper`, so no test process keeps them; so does the first case."""
    return args is CANNOT_START[0][0] or any(a.startswith(("task.validate", "task.preflight", "task.preload"))
                                              for a in args)


def listing(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if "__pycache__" not in p.parts)


CANNOT_START = [
    (["task=nosuch"], "unknown task 'nosuch': available task configs are custom, train"),
    (["task.command=null"], "task: set exactly one of task.entry"),
    (["task.entry=mymod:main"], "both are set"),
    (["task.command=null", "task.entry=nomod:main"],
     "task.entry='nomod:main': module nomod does not import (ModuleNotFoundError: No module named 'nomod')"),
    (["task.command=null", "task.entry=broken:main"], "task.entry='broken:main': module broken does not import"),
    (["task.command=null", "task.entry=mymod:nosuch"],
     "task.entry='mymod:nosuch': module mymod has no function nosuch"),
    (["task.command=null", "task.entry=mymod:not_a_function"], "module mymod has no function not_a_function"),
    (["task.command=null", "task.entry='not an entry'"], "task.entry='not an entry': expected an entry point"),
    (["task.command=[no_such_program_xyz,--fast]"], "task.command: program 'no_such_program_xyz' not found"),
    (["task.command=[python,missing.py]"], "task.command: script 'missing.py' not found in "),
    (["task.command='python \"unclosed'"], "task.command="),
    (["task.validate=nomod:validate"], "task.validate='nomod:validate': module nomod does not import"),
    (["task.preflight=mymod:nosuch", "sweeper.preflight=warn"], "task.preflight='mymod:nosuch': module mymod has no"),
    (["task.cwd=/no/such/dir"], "task.cwd='/no/such/dir': no such directory"),
    (["+task.bogus=1"],
     "unknown config key 'task.bogus'; keys of task are: args, audit, command, config_file, cwd, entry, metrics, "
     "metrics_prefix, preflight, preload, validate"),
    (["task.command=[ls]", "task.preload=[mymod]"], "task.preload=['mymod']: only with task.entry or a python"),
    (["task.command=null", "task.entry=mymod:main", "task.preload=[mymod,no_such_mod_xyz]"],
     "task.preload: no module named 'no_such_mod_xyz'"),
    (["task.command=null", "task.entry=mymod:main", "task.preload=[mymod.nope.x]"],
     "task.preload: no module named 'mymod.nope.x'"),
    (["task.command=null", "task.entry=mymod:main", "task.preload=['a/b']"],
     "task.preload=['a/b']: must be a list of module names"),
    (["task.command=null", "task.entry=mymod:main", "task.preload=mymod"],
     "task.preload='mymod': must be a list of module names"),
    (["sweeper.preflight=stop"], "sweeper.preflight=stop needs the task's preflight hook: set task.preflight="),
    (["sweeper.audit=true"], "sweeper.audit=true needs the task's resume audit hook: set task.audit=module:function"),
    (["task.validate=mymod:validate", "lr=2"], "lr=2: must be at most 1"),
]


@pytest.mark.parametrize("args, needle", CANNOT_START)
def test_a_task_that_cannot_start_is_one_line_exit_2_and_nothing_is_written(project, args, needle):
    before = listing(project)
    res = sweeper_cli("--config-dir", "conf", "+experiment=x", *args, cwd=project, real=in_own_process(args))
    assert res.code == 2, res.stdout + res.stderr
    err = res.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("sweeper: error: "), err
    assert needle in err, err
    assert listing(project) == before                # no sweeps/ dir, no run dir, nothing
    assert res.stdout == ""


def test_a_validate_hook_refusing_one_variant_names_it(project):
    proc = sweeper_in(project, "task.validate=mymod:validate", "+experiment.variants.c=['lr=3']")
    assert proc.returncode == 2 and proc.stderr.strip() == "sweeper: error: variant c: lr=3: must be at most 1"


@pytest.mark.slow
def test_a_good_user_task_plans_from_its_own_directory(project):
    proc = sweeper_in(project, "task.validate=mymod:validate", "seeds=0-1", "sweeper.dry_run=true")
    assert proc.returncode == 0, proc.stderr
    assert f"task: python train_x.py (in {project})" in proc.stdout
    assert "experiment x: 2 variants x 2 seeds (0-1) = 4 runs; baseline a, metric loss" in proc.stdout
    proc = sweeper_in(project, "task.command=null", "task.entry=mymod:main", "sweeper.dry_run=true")
    assert proc.returncode == 0 and "task: mymod:main" in proc.stdout, proc.stderr


def test_parse_task_and_argv(tmp_path):
    spec = parse_task({"command": "python train.py --lr {run_dir}/x"}, cwd=tmp_path)
    assert spec.command == ("python", "train.py", "--lr", "{run_dir}/x") and spec.cwd == str(tmp_path.resolve())
    runner = [sys.executable, "-m", "sweeper.run.command", "/r", "--"]
    assert spec.argv("/r") == [*runner, sys.executable, "train.py", "--lr", "/r/x"]
    config = {"seed": 3, "lr": 0.5, "model": {"width": 8, "act": None}, "flag": True, "sizes": [1, 2]}
    spec = parse_task({"command": "python t.py --w={model.width} --o {out_dir} {nokey_in_json}", "args": "flags"},
                      cwd=tmp_path)
    assert spec.argv("/r", config)[len(runner):] == [
        sys.executable, "t.py", "--w=8", "--o", "/r/out", "{nokey_in_json}", "--seed=3", "--lr=0.5",
        "--model.width=8", "--flag=true", "--sizes=[1,2]"]                     # null values are left out
    keys = parse_task({"command": "prog", "args": ["lr", "model.width"], "metrics": ["{seed}.json"]}, cwd=tmp_path)
    assert keys.argv("/r", config) == [sys.executable, "-m", "sweeper.run.command", "--metrics", "3.json", "/r",
                                       "--", "prog", "--lr=0.5", "--model.width=8"]
    with pytest.raises(UsageError, match=r"task.command: \{nokey_in_json\} is not a key of the run config"):
        spec.check_placeholders(config)
    entry = parse_task({"entry": "pkg.mod:main", "cwd": "."}, cwd=tmp_path)
    assert entry.argv("/r") == [sys.executable, "-m", "sweeper.run", "pkg.mod:main", "/r"]
    assert TaskSpec.from_dict(entry.to_dict()) == entry
    with pytest.raises(UsageError, match="task.validate=3"):
        parse_task({"entry": "a:b", "validate": 3})


def test_check_task_skips_an_unused_preflight_hook(tmp_path):
    spec = parse_task({"entry": "json:dumps", "preflight": "nomod:check"}, cwd=tmp_path)
    check_task(spec, preflight=False)
    with pytest.raises(UsageError, match="task.preflight='nomod:check': module nomod does not import"):
        check_task(spec)


@pytest.mark.slow
def test_a_broken_variant_is_named_before_the_task_is_probed(project):
    """Order of work: a variant that does not compose is bad input that needs no import, so it is named before
    the task's import probe starts (the probe, a process, starts on a valid command line only); with the
    variants valid, the task that cannot start is named."""
    proc = sweeper_in(project, "task.command=null", "task.entry=broken:main", "+experiment.variants.c=['nokey=1']")
    assert proc.returncode == 2 and "variant c" in proc.stderr, proc.stderr
    proc = sweeper_in(project, "task.command=null", "task.entry=broken:main")
    assert proc.returncode == 2
    assert "task.entry='broken:main': module broken does not import" in proc.stderr, proc.stderr


def test_a_probe_left_running_is_killed_when_the_compose_fails(tmp_path):
    """TaskCheck's block ends (an error, Ctrl-C) with the probe process gone, not orphaned."""
    from sweeper.config.task import TaskCheck

    (tmp_path / "slowmod.py").write_text("import time\ntime.sleep(60)\ndef main(run): pass\n")
    spec = parse_task({"entry": "slowmod:main"}, cwd=tmp_path)
    with pytest.raises(KeyboardInterrupt):
        with TaskCheck(spec) as check:
            proc = check.proc
            assert proc is not None and proc.poll() is None
            raise KeyboardInterrupt
    assert proc.poll() is not None                   # killed and reaped
    with TaskCheck(spec, timeout_s=0.5) as check:
        with pytest.raises(UsageError, match=r"task: importing slowmod:main took over 0s"):
            check.wait()
    assert check.proc.poll() is not None
