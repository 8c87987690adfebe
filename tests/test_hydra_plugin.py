"""The Hydra launcher plugin `hydra/launcher=sweeper_pool`: discovered by Hydra's plugin scan without heavy imports,
and real multiruns of small Hydra apps (tests/hydra_app/) in subprocesses: jobs pinned to one device and disjoint
cores each, a failing job not stopping its siblings, return values back, Ctrl-C leaving nothing; every job a
sweeper run dir, so that `python -m sweeper.report` turns the multirun into the decision table, and a second
launch of the same multirun runs only what did not finish."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from sweeper.run.files.manifest import read_manifest
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import Status
from tests.helpers.commands import ROOT
from tests.helpers.local_pool import processes_mentioning, wait_for

pytest_plugins = ["tests.helpers.local_pool"]     # its sweep_dir fixture

APP = ROOT / "tests" / "hydra_app" / "my_app.py"
LOSS_APP = ROOT / "tests" / "hydra_app" / "loss_app.py"
DDP_APP = ROOT / "tests" / "hydra_app" / "ddp_app.py"
CORES = sorted(os.sched_getaffinity(0))
sys.path.insert(0, str(LOSS_APP.parent))
from loss_app import loss  # noqa: E402  (the values the app returns)


def app_env(**extra) -> dict:
    env = {**os.environ, "SWEEPER_PROGRESS": "plain", **extra}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def app(*args, env=None, timeout=120, script=APP) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), *args], cwd=script.parent, env=env or app_env(),
                          capture_output=True, text=True, timeout=timeout)


def loss_app(*args, timeout=180) -> subprocess.CompletedProcess:
    return app(*args, "hydra/launcher=sweeper_pool", script=LOSS_APP, timeout=timeout)


def report(sweep_dir, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sweeper.report", str(sweep_dir), "--no-plots", *args], cwd=ROOT,
                          env=app_env(), capture_output=True, text=True, timeout=180)


def returned(proc) -> dict:
    """{(lr, seed): return value} from loss_app.py --returns."""
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line, = [ln for ln in proc.stdout.splitlines() if ln.startswith("RETURNS ")]
    out = {}
    for overrides, value in json.loads(line[len("RETURNS "):]):
        kv = dict(o.split("=", 1) for o in overrides)
        out[(float(kv.get("lr", 0.01)), int(kv.get("seed", 0)))] = value
    return out


def check_decision_table(sweep_dir, stdout: str, metric: str, values: dict, baseline: str = "lr=0.01",
                         suffix: str = "") -> None:
    """The report's table has one row per lr variant with the app's numbers (summary.csv: mean, sd, delta)."""
    import numpy as np
    import pandas as pd

    assert f"metric: final {metric} (lower" in stdout, stdout
    summary = pd.read_csv(sweep_dir / "summary.csv").set_index("variant")
    names = {lr: f"lr={lr:g}{suffix}" for lr in values}
    base = baseline if baseline in names.values() else names[0.01]
    assert sorted(summary.index) == sorted(names.values()), summary
    base_mean = float(np.mean(values[next(lr for lr, n in names.items() if n == base)]))
    rows = [ln for ln in stdout.splitlines() if ln.startswith(tuple(names.values()))]
    for lr, name in names.items():
        row = summary.loc[name]
        n = len(values[lr])
        assert (row["planned"], row["usable"]) == (n, n)
        assert row["mean"] == pytest.approx(np.mean(values[lr]), abs=1e-9)
        assert row["sd"] == pytest.approx(np.std(values[lr], ddof=1), abs=1e-9)
        line, = [ln for ln in rows if ln.split("  ")[0].strip() == name]
        assert f"{n}/{n}" in line and ("baseline" in line if name == base else f"vs {base}" in line), line
        if name != base:
            assert row["compared_with"] == base
            assert row["delta"] == pytest.approx(np.mean(values[lr]) - base_mean, abs=1e-9)


def job_records(sweep_dir) -> dict:
    """run dir -> (job.json text, stdout.log text): what a job that ran again would change."""
    return {p.parent.name: (p.read_text(), (p.parent / "stdout.log").read_text()) for p in sweep_dir.glob("*/job.json")}


def test_plugin_is_discovered_and_its_scan_imports_nothing_heavy():
    code = ("import sys\n"
            "SCHEMA = ('sweeper', 'sweeper.errors', 'sweeper.field_rules', 'sweeper.config', 'sweeper.config.fields', "
            "'sweeper.backends', 'sweeper.backends.local', 'sweeper.backends.local.schema')\n"
            "from hydra.core.plugins import Plugins\n"
            "from hydra.plugins.launcher import Launcher\n"
            "names = [f'{p.__module__}.{p.__name__}' for p in Plugins.instance().discover(Launcher)]\n"
            "print(names)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'sweeper', 'cloudpickle', 'submitit')"
            " and m not in SCHEMA))\n"
            "import hydra_plugins\n"
            "print(hasattr(hydra_plugins, '__file__') and hydra_plugins.__file__)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=app_env(), cwd="/")
    assert proc.returncode == 0, proc.stderr
    names, heavy, namespace_file = proc.stdout.strip().splitlines()
    assert "hydra_plugins.sweeper_pool.sweeper_pool_launcher.SweeperPoolLauncher" in names
    assert heavy == "[]"
    assert namespace_file in ("None", "False")          # hydra_plugins is a namespace package (no __init__.py)


@pytest.mark.slow
def test_multirun_pins_each_job_and_a_failure_does_not_stop_its_siblings(sweep_dir):
    proc = app("-m", "seed=0,1,2,3", "sleep=1.0", "hydra/launcher=sweeper_pool", "hydra.launcher.devices=[5,3]",
               f"hydra.sweep.dir={sweep_dir}", env=app_env(CUDA_VISIBLE_DEVICES="3,5"))
    assert proc.returncode == 1, proc.stdout + proc.stderr           # Hydra re-raises the failed job's error
    assert "ValueError: seed 3 is cursed" in proc.stderr
    assert "FAILED #3 seed=3" in proc.stdout and "exception: ValueError: seed 3 is cursed" in proc.stdout
    jobs = {}
    for num in range(4):
        job = json.loads((sweep_dir / str(num) / "job.json").read_text())
        jobs[job["seed"]] = job
        assert "ran in pid" in (sweep_dir / str(num) / "stdout.log").read_text()
    assert "ValueError: seed 3 is cursed" in (sweep_dir / "3" / "stdout.log").read_text()
    assert len({j["pid"] for j in jobs.values()}) == 4                 # a fresh process per job
    by_device = {}
    for job in jobs.values():
        assert job["cuda_visible_devices"] in ("3", "5")
        by_device.setdefault(job["cuda_visible_devices"], set()).add((tuple(job["affinity"]), job["omp_num_threads"]))
    assert set(by_device) == {"3", "5"} and all(len(v) == 1 for v in by_device.values())
    (a, ta), = by_device["3"]
    (b, tb), = by_device["5"]
    if len(CORES) >= 2:
        assert not set(a) & set(b) and sorted(a + b) == CORES and int(ta) + int(tb) == len(CORES)
    for d in ("3", "5"):        # one job per device at a time
        spans = sorted((j["started"], j["ended"]) for j in jobs.values() if j["cuda_visible_devices"] == d)
        assert all(s2[0] >= s1[1] for s1, s2 in zip(spans, spans[1:])), spans
    for num in range(3):        # each job dir is a run dir: its status and summary hold the return value
        rd = RunDir(sweep_dir / str(num))
        assert rd.read_status().status == Status.FINISHED and rd.read_summary().final == {"objective": num * 10}
        assert rd.read_config() == {"seed": num, "fail_on": 3, "sleep": 1.0}
    failed = RunDir(sweep_dir / "3").read_status()
    assert (failed.status, failed.error, failed.exit_code) == (Status.FAILED, "ValueError: seed 3 is cursed", 1)
    assert RunDir(sweep_dir / "3").read_summary() is None
    manifest = read_manifest(sweep_dir)
    assert manifest.source == "hydra" and manifest.experiment.variants == {"sleep=1.0": ["sleep=1.0"]}
    assert [(r.run_dir, r.seed, r.variant) for r in manifest.runs] == [(str(n), n, "sleep=1.0") for n in range(4)]


@pytest.mark.slow
def test_return_values_come_back_to_hydra(sweep_dir):
    proc = app("--returns", "seed=0,1,2", "hydra/launcher=sweeper_pool", "hydra.launcher.max_parallel=2",
               f"hydra.sweep.dir={sweep_dir}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "RETURNS [0, 10, 20]" in proc.stdout


HYDRA_HINT = "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace."


@pytest.mark.parametrize("option, line", [
    ("runs_per_device=0", "hydra.launcher.runs_per_device=0: must be a positive integer"),
    ("max_parallel=0", "hydra.launcher.max_parallel=0: must be a positive integer or null"),
    ("max_parallel=abc", "hydra.launcher.max_parallel='abc': must be a positive integer or null"),
    ("cores=[a]", "hydra.launcher.cores=['a']: must be a non-empty list of "
                  "distinct CPU core ids, e.g. [0,1,2,3], or null (every core this process may use)"),
    ("cpu_only=maybe", "hydra.launcher.cpu_only='maybe': expected a boolean (true or false)"),
    ("cpu_only=1", "hydra.launcher.cpu_only=1: expected a boolean (true or false)"),     # strict, as the cli
    ("grace_s=-1", "hydra.launcher.grace_s=-1: must be a number of seconds >= 0 (not inf)"),
    ("grace_s=inf", "hydra.launcher.grace_s=inf: must be a number of seconds >= 0 (not inf)"),
    ("stall_s=nan", "hydra.launcher.stall_s=nan: must be a number of seconds >= 0 (not inf)"),
    ("nope=1", "unknown config key 'hydra.launcher.nope'; keys of hydra.launcher are: baseline, cores, cpu_only, "
               "crash_loop_after, devices, grace_s, lower_is_better, max_log_mb, max_parallel, max_retries, metric, "
               "n_jobs, ranks_per_run, retry_backoff_s, runs_per_device, seed_key, stall_kill, stall_s, "
               "threads_per_run"),
    ("ranks_per_run=0", "hydra.launcher.ranks_per_run=0: must be an integer from 1 to 64 (processes per run, one "
                        "GPU each)"),
    ("n_jobs=0", "hydra.launcher.n_jobs=0: must be a positive integer (or -1: no cap)"),
    ("lower_is_better=maybe", "hydra.launcher.lower_is_better='maybe': must be true or false"),
    ("metric=[a]", "hydra.launcher.metric=['a']: must be a non-empty name"),
])
def test_bad_launcher_option_is_one_line_naming_it(sweep_dir, option, line):
    proc = app("-m", "seed=0", "hydra/launcher=sweeper_pool", f"hydra.launcher.{option}",
               f"hydra.sweep.dir={sweep_dir}")
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and ln != HYDRA_HINT]
    assert proc.returncode == 1 and lines == [line], proc.stderr  # Hydra's exit status for a config error
    assert sorted(p.name for p in sweep_dir.iterdir()) == ["multirun.yaml"]  # no job started


def test_every_key_of_the_local_launcher_schema_is_a_plugin_option(sweep_dir):
    import dataclasses

    from hydra_plugins.sweeper_pool._core import pool_config
    from sweeper.backends.local.schema import LocalLauncherConf, PoolConf

    keys = [f.name for f in dataclasses.fields(PoolConf)]
    assert set(keys) == {f.name for f in dataclasses.fields(LocalLauncherConf)} - {"name"}
    given = {
        "devices": ["1"],
        "runs_per_device": 2,
        "cpu_only": True,
        "max_parallel": 3,
        "threads_per_run": 1,
        "cores": CORES[:1],
        "max_retries": 4,
        "retry_backoff_s": 0.5,
        "crash_loop_after": 5,
        "grace_s": 1.5,
        "ranks_per_run": 2,
        "max_log_mb": 2.5,
        "stall_s": 7.0,
        "stall_kill": True,
    }
    assert set(given) == set(keys)
    proc = app(
        "--cfg",
        "hydra",
        "-p",
        "hydra.launcher",
        "hydra/launcher=sweeper_pool",
        *[f"hydra.launcher.{k}={json.dumps(v)}" for k, v in given.items()],
    )
    assert proc.returncode == 0, proc.stderr
    import yaml

    shown = yaml.safe_load(proc.stdout)
    assert {k: shown[k] for k in keys} == given
    cfg = pool_config(given)
    assert {k: getattr(cfg, k) for k in keys} == given
    defaults = yaml.safe_load(app("--cfg", "hydra", "-p", "hydra.launcher", "hydra/launcher=sweeper_pool").stdout)
    assert {k: defaults[k] for k in keys} == {**dataclasses.asdict(PoolConf()), "max_retries": 0, "crash_loop_after": 0}


def test_ctrl_c_of_a_multirun_leaves_no_process(sweep_dir, tmp_path):
    log = tmp_path / "app.log"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(APP),
            "-m",
            "seed=0,1",
            "sleep=120",
            "hydra/launcher=sweeper_pool",
            "hydra.launcher.grace_s=5",
            f"hydra.sweep.dir={sweep_dir}",
        ],
        cwd=APP.parent,
        env=app_env(),
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    wait_for(
        lambda: len(list(sweep_dir.glob("*/job.json"))) == 0 and len(processes_mentioning(str(sweep_dir))) >= 3,
        60,
        "two jobs running",
        proc,
        log,
    )
    t0 = time.time()
    os.kill(proc.pid, signal.SIGINT)
    proc.wait(timeout=30)
    assert time.time() - t0 < 15
    assert processes_mentioning(str(sweep_dir)) == [], log.read_text()
    assert "interrupted: stopping 2 running run(s)" in log.read_text()
    for num in ("0", "1"):  # completed by the parent: the jobs died of the SIGTERM without a word
        record = RunDir(sweep_dir / num).read_status()
        assert record.status == Status.INTERRUPTED and record.error.startswith("stopped by Ctrl-C"), record


# -- the run contract: decision table, skips, options ---------------------------------------------------------

SWEEP = ["seed=0,1,2", "lr=0.01,0.1"]
BASELINE = 'hydra.launcher.baseline="lr=0.01"'


@pytest.mark.slow
def test_a_multirun_is_a_sweep_and_a_second_launch_starts_no_job(sweep_dir):
    first = loss_app("-m", *SWEEP, BASELINE, f"hydra.sweep.dir={sweep_dir}")
    assert first.returncode == 0, first.stdout + first.stderr
    manifest = read_manifest(sweep_dir)
    exp = manifest.experiment
    assert (manifest.source, exp.name, exp.baseline, exp.metric, exp.lower_is_better) == (
        "hydra",
        "loss_app",
        "lr=0.01",
        "objective",
        True,
    )
    assert exp.variants == {"lr=0.01": ["lr=0.01"], "lr=0.1": ["lr=0.1"]}
    by_dir = {r.run_dir: r for r in manifest.runs}
    assert sorted((r.variant, r.seed) for r in manifest.runs) == [
        (v, s) for v in ("lr=0.01", "lr=0.1") for s in range(3)
    ]
    for entry in manifest.runs:
        rd = RunDir(sweep_dir / entry.run_dir)
        lr = float(entry.variant.split("=")[1])
        record, summary = rd.read_status(), rd.read_summary()
        assert (record.status, record.run_id, record.experiment, record.variant, record.seed) == (
            Status.FINISHED,
            entry.run_id,
            "loss_app",
            entry.variant,
            entry.seed,
        )
        assert summary.final == {"objective": loss(lr, entry.seed)} and summary.config_hash == entry.config_hash
        assert rd.read_config() == {"seed": entry.seed, "lr": lr, "use_run": False, "die": False}
        job = json.loads((rd.path / "job.json").read_text())
        assert job["run_dir"] == str(rd.path)  # SWEEPER_RUN_DIR is the job's output dir
    assert len(by_dir) == 6

    table = report(sweep_dir)
    assert table.returncode == 0, table.stdout + table.stderr
    check_decision_table(
        sweep_dir, table.stdout, "objective", {lr: [loss(lr, s) for s in range(3)] for lr in (0.01, 0.1)}
    )

    before = job_records(sweep_dir)
    again = app(
        "--returns", *SWEEP, "hydra/launcher=sweeper_pool", BASELINE, f"hydra.sweep.dir={sweep_dir}", script=LOSS_APP
    )
    assert returned(again) == {(lr, s): loss(lr, s) for lr in (0.01, 0.1) for s in range(3)}
    assert "start " not in again.stdout and again.stdout.count("(already finished)") == 6, again.stdout
    assert job_records(sweep_dir) == before  # no job process ran, no log grew
    for result in (sweep_dir / ".sweeper_pool").glob("*.result.pkl"):
        result.write_bytes(b"damaged")  # rebuilt from the summaries
    assert returned(
        app(
            "--returns",
            *SWEEP,
            "hydra/launcher=sweeper_pool",
            BASELINE,
            f"hydra.sweep.dir={sweep_dir}",
            script=LOSS_APP,
        )
    ) == {(lr, s): loss(lr, s) for lr in (0.01, 0.1) for s in range(3)}
    assert job_records(sweep_dir) == before


@pytest.mark.slow
def test_a_job_whose_config_changed_runs_again_and_the_report_asks_for_a_baseline(sweep_dir):
    assert loss_app("-m", "seed=0,1", "lr=0.01,0.1", f"hydra.sweep.dir={sweep_dir}").returncode == 0
    before = job_records(sweep_dir)
    proc = app(
        "--returns",
        "seed=0,1",
        "lr=0.01,0.001",
        "hydra/launcher=sweeper_pool",
        f"hydra.sweep.dir={sweep_dir}",
        script=LOSS_APP,
    )
    assert returned(proc) == {(lr, s): loss(lr, s) for lr in (0.01, 0.001) for s in range(2)}
    after = job_records(sweep_dir)
    manifest = read_manifest(sweep_dir)
    changed = sorted(r.run_dir for r in manifest.runs if r.variant == "lr=0.001")
    assert len(changed) == 2 and proc.stdout.count("(already finished)") == 2, proc.stdout
    assert {d for d in after if after[d] != before[d]} == set(changed)
    assert set(manifest.experiment.variants) == {"lr=0.01", "lr=0.001"} and manifest.experiment.baseline == ""
    for d in changed:
        assert RunDir(sweep_dir / d).read_summary().final == {"objective": loss(0.001, manifest.runs[int(d)].seed)}

    asked = report(sweep_dir)
    assert asked.returncode == 2, asked.stdout + asked.stderr
    assert "Traceback" not in asked.stderr and "--baseline" in asked.stderr and "no baseline" in asked.stderr, (
        asked.stderr
    )
    given = report(sweep_dir, "--baseline", "lr=0.01", "--min-seeds", "2")
    assert given.returncode == 0, given.stdout + given.stderr
    check_decision_table(
        sweep_dir,
        given.stdout,
        "objective",
        {lr: [loss(lr, s) for s in range(2)] for lr in (0.01, 0.001)},
        baseline="lr=0.01",
    )


@pytest.mark.slow
def test_a_job_using_the_run_api_gets_its_finish_metrics_in_the_table(sweep_dir):
    proc = loss_app(
        "-m",
        *SWEEP,
        "use_run=true",
        'hydra.launcher.baseline="lr=0.01 use_run=true"',
        "hydra.launcher.metric=val_loss",
        f"hydra.sweep.dir={sweep_dir}",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = read_manifest(sweep_dir)
    assert set(manifest.experiment.variants) == {"lr=0.01 use_run=True", "lr=0.1 use_run=True"}  # Hydra's spelling
    for entry in manifest.runs:
        rd = RunDir(sweep_dir / entry.run_dir)
        lr = float(entry.variant.split()[0].split("=")[1])
        summary = rd.read_summary()
        assert summary.final == {"val_loss": loss(lr, entry.seed)} and summary.steps == 1  # not the return value
        assert (summary.variant, summary.seed, summary.config_hash) == (entry.variant, entry.seed, entry.config_hash)
        assert rd.read_status().status == Status.FINISHED and rd.read_metrics()[0] == [
            {"step": 0, "train_loss": 2 * loss(lr, entry.seed)}
        ]
    table = report(sweep_dir)
    assert table.returncode == 0, table.stdout + table.stderr
    check_decision_table(
        sweep_dir,
        table.stdout,
        "val_loss",
        {lr: [loss(lr, s) for s in range(3)] for lr in (0.01, 0.1)},
        suffix=" use_run=True",
    )


@pytest.mark.slow
def test_n_jobs_caps_the_pool_and_a_job_without_a_seed_is_seed_0_with_a_warning(sweep_dir):
    proc = loss_app("-m", "lr=0.01,0.1", "hydra.launcher.n_jobs=1", f"hydra.sweep.dir={sweep_dir}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sweeper_pool: 1 slot(s)" in proc.stdout
    assert proc.stdout.count("has no seed=... override: recorded as seed 0") == 2, proc.stdout
    for num in ("0", "1"):  # one slot: each job had every core
        assert RunDir(sweep_dir / num).read_env()["cpu_affinity"] == CORES
        record = RunDir(sweep_dir / num).read_status()
        assert record.seed == 0 and record.warnings and "no seed=... override" in record.warnings[0]
    assert [(r.variant, r.seed) for r in read_manifest(sweep_dir).runs] == [("lr=0.01", 0), ("lr=0.1", 0)]


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["seed=0,1", "lr=0.01,0.1", 'hydra.launcher.baseline="lr=0.5"'],
            "hydra.launcher.baseline='lr=0.5' is not a variant of this multirun; its variants are 'lr=0.01', 'lr=0.1'",
        ),
        (
            ["seed=0,0", "lr=0.01"],
            "are both variant 'lr=0.01' with seed 0: the decision table needs one job per variant",
        ),
        (
            ["seed=0", "hydra.launcher.n_jobs=2", "hydra.launcher.max_parallel=3"],
            "hydra.launcher.n_jobs=2 and hydra.launcher.max_parallel=3 disagree",
        ),
    ],
    ids=["baseline", "duplicate", "n_jobs"],
)
def test_a_bad_sweep_is_one_line_before_anything_starts(sweep_dir, args, message):
    proc = loss_app("-m", *args, f"hydra.sweep.dir={sweep_dir}")
    assert proc.returncode == 1 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert sorted(p.name for p in sweep_dir.iterdir()) == ["multirun.yaml"]  # Hydra's own, nothing of ours


@pytest.mark.slow
def test_a_killed_job_is_completed_by_the_parent_and_an_old_result_does_not_outlive_its_config(sweep_dir):
    assert loss_app("-m", "seed=0,1", f"hydra.sweep.dir={sweep_dir}").returncode == 0
    proc = loss_app("-m", "seed=0,1", "die=true", f"hydra.sweep.dir={sweep_dir}")  # same dirs, new config
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for num in ("0", "1"):
        rd = RunDir(sweep_dir / num)
        record = rd.read_status()
        assert (record.status, record.error, record.exit_code, record.failure_class) == (
            Status.FAILED,
            "killed by SIGKILL",
            -9,
            "signal",
        ), record
        assert (record.variant, record.seed, record.attempts) == ("die=True", int(num), 1)
        assert rd.read_summary().status == Status.PENDING and rd.read_summary().final == {}
        assert rd.outcome() == Status.FAILED  # the first config's finished summary does not win


@pytest.mark.slow
def test_ranks_per_run_makes_each_job_a_process_group_and_rank_0_records_it(sweep_dir):
    proc = app(
        "-m",
        "seed=0,1",
        "hydra/launcher=sweeper_pool",
        "hydra.launcher.ranks_per_run=2",
        "hydra.launcher.cpu_only=true",
        f"hydra.sweep.dir={sweep_dir}",
        script=DDP_APP,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = read_manifest(sweep_dir)
    assert manifest.resources == {"default": {"ranks_per_run": 2}}
    ports = set()
    for entry in manifest.runs:
        rd = manifest.run_dir(sweep_dir, entry)
        ranks = [json.loads((rd.path / f"rank{r}.json").read_text()) for r in (0, 1)]
        assert [r["sum"] for r in ranks] == [3.0, 3.0] and {r["world"] for r in ranks} == {2}
        ports |= {r["port"] for r in ranks}
        assert rd.read_summary().final == {"objective": 3.0 + entry.seed}
        assert rd.read_env(rank=1)["rank"]["rank"] == "1" and (rd.path / "stdout.rank1.log").exists()
    assert len(ports) == 2  # one MASTER_PORT per job
