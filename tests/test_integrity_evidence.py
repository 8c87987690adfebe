"""Checks across runs, classes 4, 7, 10 and 11 of issue 37 (evaluation identity, determinism, code provenance, run
isolation): per class a bug/healthy twin pair of tiny projects swept through the real CLI, at both integration
levels (a plain argparse script through task.command; a script on the run API): the bug named by its check, the
twin quiet (no finding, exit 0).

    python -m pytest -q -n 0 -p no:cacheprovider tests/test_integrity_evidence.py
"""
from __future__ import annotations

import json
import subprocess

import pytest

from tests.helpers.integrity_evidence_projects import findings_of, make_project, sweep

pytestmark = pytest.mark.slow
LEVELS = ["command", "api"]
UNSEEDED = "np.random.default_rng()"
FIXED_CKPT = '"ckpt/model.npz"'
OWN_CKPT = 'os.path.join(cfg.out, "model.npz")'


def names(sweep_dir) -> dict[str, object]:
    return {f.check: f for f in findings_of(sweep_dir)}


def ok(proc) -> None:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def named(proc, sweep_dir, check: str, verdict_of: str | None = None) -> None:
    """What the user reads names the check: the terminal's findings, report.md's section, and the verdict of the
    comparison it breaks (`verdict_of`: the variant, vs base)."""
    out = proc.stdout + proc.stderr
    assert "checks across runs: " in out and f"  {check} [" in out, out[-3000:]
    md = (sweep_dir / "report.md").read_text()
    assert f"| {check} |" in md[md.index("## Checks across runs"):], md[-3000:]
    if verdict_of:
        [line] = [ln for ln in out.splitlines() if ln.startswith(f"{verdict_of} vs base: ")]
        assert check in line and not line.startswith((f"{verdict_of} vs base: BETTER", f"{verdict_of} vs base: WORSE",
                                                      f"{verdict_of} vs base: INCONCLUSIVE")), line


def quiet(proc, sweep_dir) -> None:
    ok(proc)
    assert "checks across runs" not in proc.stdout + proc.stderr, proc.stdout[-3000:]
    assert "## Checks across runs\n\nNone: no check found anything" in (sweep_dir / "report.md").read_text()
    assert names(sweep_dir) == {}, findings_of(sweep_dir)


@pytest.mark.parametrize("level", LEVELS)
def test_a_healthy_project_is_quiet_at_every_check(tmp_path, level):
    """The twin of every bug below: a control equal to the baseline, checkpoints in the run's own folder, one
    evaluation set, one code: no finding, exit 0; the runs recorded their evaluation fingerprint and code."""
    ckpt = OWN_CKPT if level == "command" else "os.path.join(run.dir.path, 'out', 'model.npz')"
    project = make_project(tmp_path, level, variants={"base": [], "again": [], "wide": ["width=8"]},
                           controls=["again"], ckpt=ckpt)
    proc, sweep_dir = sweep(project, "seeds=0-1", "sweeper.determinism_probe=true")
    quiet(proc, sweep_dir)
    summary = json.loads((sweep_dir / "runs" / "wide" / "seed_1" / "summary.json").read_text())
    assert len(summary["fingerprint"]["eval_fingerprint"]) == 16, summary["fingerprint"]
    assert summary["fingerprint"]["script"].endswith("train_np.py")
    assert "eval_fingerprint" not in summary["final"]                 # the documented key is not a metric
    assert (sweep_dir / "probe" / "base" / "seed_0" / "summary.json").is_file()
    proc, _ = sweep(project, "seeds=0-2", "sweeper.extend=true")      # extend onto the same code: no warning
    quiet(proc, sweep_dir)
    assert "changed code" not in proc.stderr, proc.stderr


# -- class 4: evaluation identity ---------------------------------------------------------------------------------

def test_a_variant_that_changes_the_evaluation_set_is_not_comparable_command(tmp_path):
    project = make_project(tmp_path, "command", variants={"base": [], "small": ["val_size=32"]})
    proc, sweep_dir = sweep(project, "seeds=0-1")
    ok(proc)
    found = names(sweep_dir)["evaluation_identity"]
    assert found.variants == ("small",) and found.effect.value == "not comparable"
    assert "val_size: 64 -> 32" in found.evidence and "evaluation fingerprint" in found.evidence, found
    named(proc, sweep_dir, "evaluation_identity", "small")
    assert "(changes the evaluation: val_size)" in proc.stdout                      # the changes table
    assert "`val_size` (evaluation)" in (sweep_dir / "report.md").read_text()


def test_an_evaluation_set_that_depends_on_the_variant_is_caught_by_its_fingerprint_api(tmp_path):
    """No evaluation key changes: only the fingerprint the run API recorded shows the arms saw other data."""
    project = make_project(tmp_path, "api", val="np.arange(128, 128 + 16 * cfg.width)")
    proc, sweep_dir = sweep(project, "seeds=0-1")
    ok(proc)
    found = names(sweep_dir)
    assert set(found) == {"evaluation_identity"}, found
    assert found["evaluation_identity"].variants == ("wide",)
    assert "changes" not in found["evaluation_identity"].evidence     # no key named it: the fingerprint did
    named(proc, sweep_dir, "evaluation_identity", "wide")


@pytest.mark.parametrize("level", LEVELS)
def test_an_evaluation_set_drawn_from_the_seed_is_named(tmp_path, level):
    project = make_project(tmp_path, level, val="np.random.default_rng(cfg.seed).choice(np.arange(128, 256), 64)")
    proc, sweep_dir = sweep(project, "seeds=0-1")
    ok(proc)
    found = names(sweep_dir)
    assert set(found) == {"evaluation_varies_with_seed"}, found      # same data per seed across arms: comparable
    assert found["evaluation_varies_with_seed"].effect.value == "warn"
    named(proc, sweep_dir, "evaluation_varies_with_seed")


# -- class 7: determinism -----------------------------------------------------------------------------------------

def test_an_a_a_control_that_differs_from_the_baseline_says_runs_are_not_deterministic(tmp_path):
    project = make_project(tmp_path, "command", variants={"base": [], "again": []}, controls=["again"],
                           order=UNSEEDED)
    proc, sweep_dir = sweep(project, "seeds=0-2")
    ok(proc)
    found = names(sweep_dir)["nondeterminism"]
    assert found.variants == ("again",) and "at seeds 0, 1, 2 of 3" in found.evidence, found
    assert "of the seed spread" in found.evidence and "curves differ" in found.evidence, found
    named(proc, sweep_dir, "nondeterminism")


def test_the_determinism_probe_reruns_a_baseline_seed_and_names_the_noise(tmp_path):
    project = make_project(tmp_path, "api", order=UNSEEDED)
    proc, sweep_dir = sweep(project, "seeds=0-1", "sweeper.determinism_probe=true")
    ok(proc)
    assert "determinism probe: base/seed_0 again" in proc.stdout, proc.stdout[-2000:]
    found = names(sweep_dir)["nondeterminism"]
    assert found.variants == ("base",) and "probe ran base seed 0 again" in found.evidence, found
    named(proc, sweep_dir, "nondeterminism")
    runs = json.loads((sweep_dir / "sweep.json").read_text())["runs"]
    assert not any("probe" in r["run_dir"] for r in runs)             # not a run of the plan: nothing counts it


# -- class 10: code provenance ------------------------------------------------------------------------------------

def git(project, *args: str) -> str:
    return subprocess.run(["git", "-C", str(project), *args], capture_output=True, text=True, check=True).stdout


def test_extend_onto_a_new_commit_warns_first_and_the_report_says_mixed_code(tmp_path):
    project = make_project(tmp_path, "command")
    git(project, "init", "-q")
    git(project, "-c", "user.name=t", "-c", "user.email=t@t", "add", "train_np.py", "conf")
    git(project, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    first = git(project, "rev-parse", "HEAD").strip()
    proc, sweep_dir = sweep(project, "seeds=0-1", f"sweeper.journal={tmp_path / 'journal'}")
    ok(proc)
    assert names(sweep_dir) == {}
    script = project / "train_np.py"
    script.write_text(script.read_text().replace("w - 0.05 *", "w - 0.06 *"))     # a fix, committed
    git(project, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "fix")
    second = git(project, "rev-parse", "HEAD").strip()
    proc, _ = sweep(project, "seeds=0-3", "sweeper.extend=true", f"sweeper.journal={tmp_path / 'journal'}")
    ok(proc)
    warning = [ln for ln in proc.stderr.splitlines() if "changed code" in ln]
    assert len(warning) == 1 and first[:12] in warning[0] and second[:12] in warning[0], proc.stderr
    found = names(sweep_dir)["mixed_code"]
    assert found.effect.value == "mixed code" and set(found.variants) == {"base", "wide"}, found
    assert f"commit {first[:12]}, script" in found.evidence and ": base seeds 0-1, wide seeds 0-1;" in found.evidence
    named(proc, sweep_dir, "mixed_code", "wide")
    journal = (tmp_path / "journal" / "journal.md").read_text()
    assert first[:12] in journal and second[:12] in journal, journal


def test_a_script_edited_between_seeds_is_mixed_code_without_git_api(tmp_path):
    project = make_project(tmp_path, "api")
    proc, sweep_dir = sweep(project, "seeds=0-1")
    ok(proc)
    script = project / "train_np.py"
    script.write_text(script.read_text() + "# edited\n")
    proc, _ = sweep(project, "seeds=0-2", "sweeper.extend=true")
    ok(proc)
    assert "script changed" in proc.stderr, proc.stderr
    found = names(sweep_dir)["mixed_code"]
    assert "script hashes differ" in found.message and set(found.variants) == {"base", "wide"}, found
    named(proc, sweep_dir, "mixed_code", "wide")


# -- class 11: run isolation --------------------------------------------------------------------------------------

def test_runs_writing_one_fixed_checkpoint_resumed_each_other_command(tmp_path):
    """No {out_dir} in the command: every run writes ckpt/model.npz in the project and the next run loads it."""
    project = make_project(tmp_path, "command", command=["python", "train_np.py"], ckpt=FIXED_CKPT)
    proc, sweep_dir = sweep(project, "seeds=0-1", "launcher.max_parallel=1")
    ok(proc)
    found = names(sweep_dir)
    assert found["shared_checkpoint"].effect.value == "invalid", found
    assert "ckpt/model.npz" in found["shared_checkpoint"].evidence
    assert "no per-run path" in found["writes_outside_run_dir"].message, found["writes_outside_run_dir"]
    named(proc, sweep_dir, "shared_checkpoint", "wide")
    named(proc, sweep_dir, "writes_outside_run_dir")


def test_a_run_api_script_writing_into_the_project_folder_is_named(tmp_path):
    """Every run appends to one results.csv: written outside the run dirs, and each later run wrote again what an
    earlier one wrote (shared_state: its numbers could hang on it, the timestamps cannot tell)."""
    project = make_project(tmp_path, "api", extra="open('results.csv', 'a').write(f'{cfg.seed}\\n')")
    proc, sweep_dir = sweep(project, "seeds=0-1", "launcher.max_parallel=1")
    ok(proc)
    found = names(sweep_dir)
    assert set(found) == {"writes_outside_run_dir", "shared_state"}, found
    assert "results.csv" in found["writes_outside_run_dir"].evidence
    assert found["shared_state"].evidence.startswith("1 file(s): results.csv: rewritten by ")
    named(proc, sweep_dir, "writes_outside_run_dir")
    named(proc, sweep_dir, "shared_state")
