"""Incremental sweeps (issue 47) through the real CLI: a run is trained once and every later sweep that needs it
reuses it; a run whose identity differs in anything trains, and a dry run names the first input that differs.

    python -m pytest -q -n 0 tests/test_reuse.py
"""
from __future__ import annotations

import json

import pytest

from tests.helpers.reuse_projects import add_variant, finals, reuse_project, started, sweep, sweep_dir_of

pytestmark = pytest.mark.slow


def ok(proc) -> None:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_adding_a_variant_trains_only_its_runs_and_equals_a_sweep_from_scratch(tmp_path):
    project = reuse_project(tmp_path)
    first = sweep(project, "seeds=0-1")
    ok(first)
    old = sweep_dir_of(first)
    add_variant(project, "narrow", ["width=2"])
    dry = sweep(project, "seeds=0-1", "sweeper.dry_run=true")
    ok(dry)
    assert f"reuse: 4 of 6 runs reused from {old.name} (4); 2 would train" in dry.stdout, dry.stdout
    assert "  train narrow/seed_0: config: no earlier run has this run config" in dry.stdout
    proc = sweep(project, "seeds=0-1")
    ok(proc)
    assert f"4 of 6 runs reused from {old.name} (4): 2 to train" in proc.stdout + proc.stderr
    assert sorted(started(proc)) == ["narrow/seed_0", "narrow/seed_1"], proc.stdout
    new = sweep_dir_of(proc)
    reused = json.loads((new / "reused.json").read_text())["runs"]
    assert sorted(e["source"] for e in reused.values()) == sorted(str(old / "runs" / v / f"seed_{s}")
                                                                  for v in ("base", "wide") for s in (0, 1))
    assert (old / "runs" / "base" / "seed_0" / "summary.json").is_file(), "the earlier sweep stays whole"
    scratch = sweep(project, "seeds=0-1", "sweeper.reuse=false", f"sweeper.dir={tmp_path / 'scratch'}")
    ok(scratch)
    assert len(started(scratch)) == 6 and "reused" not in scratch.stdout
    assert finals(new) == finals(tmp_path / "scratch") and len(finals(new)) == 6
    assert (new / "summary.csv").read_text() == (tmp_path / "scratch" / "summary.csv").read_text().replace(
        str(tmp_path / "scratch"), str(new))
    assert "checks across runs" not in proc.stdout + proc.stderr, proc.stdout[-2000:]   # their own records: one code
    add_variant(project, "wide", None)                  # a variant removed: nothing to train
    proc = sweep(project, "seeds=0-1")
    ok(proc)
    assert started(proc) == [] and "4 of 4 runs reused" in proc.stdout + proc.stderr
    proc = sweep(project, "seeds=0-1", "sweeper.decision.alpha=0.1", "sweeper.dry_run=true")
    ok(proc)                                            # report options only: the same sweep, nothing to train
    assert "reuse: nothing left to train" in proc.stdout, proc.stdout


def test_a_dry_run_names_why_each_run_would_train_again(tmp_path):
    project = reuse_project(tmp_path)
    first = sweep(project, "seeds=0-1")
    ok(first)
    old = sweep_dir_of(first)
    add_variant(project, "narrow", ["width=2"])

    def why(*args) -> dict[str, str]:
        proc = sweep(project, "seeds=0-1", "sweeper.dry_run=true", *args)
        ok(proc)
        return {ln.split(": ", 1)[0].split()[-1]: ln.split(": ", 1)[1] for ln in proc.stdout.splitlines()
                if ln.startswith("  train ")}

    assert why("steps=7")["base/seed_0"].startswith("config: steps: 6 -> 7 ("), why("steps=7")
    (project / "helpers_np.py").write_text("SCALE = 1.0  # edited\n")
    assert why()["wide/seed_1"].startswith("code: helpers_np.py changed ("), why()
    (project / "helpers_np.py").write_text("SCALE = 1.0\n")
    summary = old / "runs" / "base" / "seed_0" / "summary.json"
    record = json.loads(summary.read_text())
    torch_now = record["fingerprint"]["environment"]["torch"]
    record["fingerprint"]["environment"]["torch"] = "1.0.0"     # as if trained on another torch
    summary.write_text(json.dumps(record))
    reasons = why()
    assert reasons["base/seed_0"].startswith(f"torch: 1.0.0 -> {torch_now} ("), reasons
    assert set(reasons) == {"base/seed_0", "narrow/seed_0", "narrow/seed_1"}, reasons
    status = old / "runs" / "wide" / "seed_0" / "status.json"
    status.write_text(status.read_text().replace('"finished"', '"failed"'))     # a failed run is never reused
    assert "not finished" in why()["wide/seed_0"]
    proc = sweep(project, "seeds=0-1", "sweeper.dry_run=true", "sweeper.reuse=false")
    assert "reuse: off (sweeper.reuse=false): every run trains" in proc.stdout


def test_reuse_from_a_folder_that_is_not_one_is_refused_before_anything_starts(tmp_path):
    project = reuse_project(tmp_path)
    proc = sweep(project, "seeds=0", "sweeper.reuse_from=[nowhere]")
    assert proc.returncode == 2 and "sweeper.reuse_from: nowhere is not a folder" in proc.stderr, proc.stderr
    assert not (project / "sweeps").exists()


def test_gc_lists_then_removes_runs_no_sweep_refers_to(tmp_path):
    import subprocess
    import sys

    from tests.helpers.integrity_evidence_projects import user_env
    project = reuse_project(tmp_path)
    first = sweep(project, "seeds=0")
    ok(first)
    stray = sweep_dir_of(first) / "runs" / "gone" / "seed_0"
    stray.mkdir(parents=True)
    (stray / "metrics.jsonl").write_text("{}\n")
    gc = [sys.executable, "-m", "sweeper.gc"]
    listed = subprocess.run(gc, cwd=project, env=user_env(), capture_output=True, text=True)
    assert listed.returncode == 0 and "runs/gone/seed_0" in listed.stdout and "dry run: 1 unreferenced" in \
        listed.stdout, listed.stdout + listed.stderr
    assert "disk: " in listed.stdout and stray.exists()
    removed = subprocess.run(gc + ["--delete"], cwd=project, env=user_env(), capture_output=True, text=True)
    assert removed.returncode == 0 and "removed 1 of 1" in removed.stdout and not stray.exists()
    assert (sweep_dir_of(first) / "runs" / "base" / "seed_0" / "summary.json").is_file()


@pytest.mark.slurm
def test_a_variant_added_on_slurm_reuses_the_local_runs(tmp_path, slurm_cluster):
    project = reuse_project(tmp_path)
    ok(sweep(project, "seeds=0-1"))
    add_variant(project, "narrow", ["width=2"])
    proc = sweep(project, "seeds=0-1", "launcher=slurm", "launcher.cpus_per_task=1", "launcher.gpus_per_node=0",
                 "launcher.poll_s=0.5", timeout=600)
    ok(proc)
    assert "4 of 6 runs reused" in proc.stdout + proc.stderr, proc.stdout[-3000:]
    assert len(finals(sweep_dir_of(proc))) == 6
