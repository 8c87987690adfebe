"""The Hydra launcher plugin `hydra/launcher=sweeper_pool`: discovered by Hydra's plugin scan without heavy imports,
and a real multirun of a small Hydra app (tests/hydra_app/my_app.py) in a subprocess: jobs pinned to one device
and disjoint cores each, a failing job not stopping its siblings, return values back, Ctrl-C leaving nothing."""
import json
import os
import signal
import subprocess
import sys
import time

from conftest import ROOT
from local_helpers import processes_mentioning, wait_for

pytest_plugins = ["local_helpers"]     # its sweep_dir fixture

APP = ROOT / "tests" / "hydra_app" / "my_app.py"
CORES = sorted(os.sched_getaffinity(0))


def app_env(**extra) -> dict:
    env = {**os.environ, "SWEEPER_PROGRESS": "plain", **extra}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def app(*args, env=None, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(APP), *args], cwd=APP.parent, env=env or app_env(),
                          capture_output=True, text=True, timeout=timeout)


def test_plugin_is_discovered_and_its_scan_imports_nothing_heavy():
    code = ("import sys\n"
            "from hydra.core.plugins import Plugins\n"
            "from hydra.plugins.launcher import Launcher\n"
            "names = [f'{p.__module__}.{p.__name__}' for p in Plugins.instance().discover(Launcher)]\n"
            "print(names)\n"
            "print(sorted(m for m in ('torch', 'sweeper', 'cloudpickle', 'submitit') if m in sys.modules))\n"
            "import hydra_plugins\n"
            "print(hasattr(hydra_plugins, '__file__') and hydra_plugins.__file__)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=app_env(), cwd="/")
    assert proc.returncode == 0, proc.stderr
    names, heavy, namespace_file = proc.stdout.strip().splitlines()
    assert "hydra_plugins.sweeper_pool.sweeper_pool_launcher.SweeperPoolLauncher" in names
    assert heavy == "[]"
    assert namespace_file in ("None", "False")          # hydra_plugins is a namespace package (no __init__.py)


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


def test_return_values_come_back_to_hydra(sweep_dir):
    proc = app("--returns", "seed=0,1,2", "hydra/launcher=sweeper_pool", "hydra.launcher.max_parallel=2",
               f"hydra.sweep.dir={sweep_dir}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "RETURNS [0, 10, 20]" in proc.stdout


def test_bad_launcher_option_names_the_key(sweep_dir):
    proc = app("-m", "seed=0", "hydra/launcher=sweeper_pool", "hydra.launcher.runs_per_device=0",
               f"hydra.sweep.dir={sweep_dir}")
    assert proc.returncode == 1 and "hydra.launcher.runs_per_device=0: must be a positive integer" in proc.stderr


def test_ctrl_c_of_a_multirun_leaves_no_process(sweep_dir, tmp_path):
    log = tmp_path / "app.log"
    proc = subprocess.Popen([sys.executable, str(APP), "-m", "seed=0,1", "sleep=120", "hydra/launcher=sweeper_pool",
                             "hydra.launcher.grace_s=5", f"hydra.sweep.dir={sweep_dir}"], cwd=APP.parent,
                            env=app_env(), stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    wait_for(lambda: len(list(sweep_dir.glob("*/job.json"))) == 0 and len(processes_mentioning(str(sweep_dir))) >= 3,
             60, "two jobs running", proc, log)
    t0 = time.time()
    os.kill(proc.pid, signal.SIGINT)
    proc.wait(timeout=30)
    assert time.time() - t0 < 15
    assert processes_mentioning(str(sweep_dir)) == [], log.read_text()
    assert "interrupted: stopping 2 running run(s)" in log.read_text()
