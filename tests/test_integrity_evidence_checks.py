"""Unit tests of the checks across runs of classes 4, 7, 10, 11 (sweeper.analysis.integrity: evaluation,
determinism, provenance, isolation) on hand-made evidence, and of the run-side records they read
(sweeper.run.observed.evaluation, sweeper.run.observed.provenance, sweeper.run.observed.folder_watch). The twins
through the real CLI: tests/test_integrity_evidence.py.

    python -m pytest -q -n 0 -p no:cacheprovider tests/test_integrity_evidence_checks.py
"""
from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
import pytest

from sweeper.analysis.integrity import SweepEvidence, check_sweep
from sweeper.analysis.integrity.numbers.determinism import nondeterminism as check_determinism
from sweeper.analysis.integrity.records.evaluation import (
    evaluation_identity,
    evaluation_varies_with_seed,
    is_evaluation_key,
)
from sweeper.analysis.integrity.records.isolation import shared_checkpoint, writes_outside_run_dir
from sweeper.analysis.integrity.records.provenance import mixed_code
from sweeper.config.variants.config_diff import Change
from sweeper.plan.probe import PROBE
from sweeper.run.files.experiment import Experiment
from sweeper.run.files.isolation import IsolationRecord, read_isolation, write_isolation
from sweeper.run.files.records import Summary
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import Status
from sweeper.run.observed.evaluation import fingerprint_of
from sweeper.run.observed.folder_watch import changed, snapshot
from sweeper.run.observed.provenance import file_sha256, script_of

EXP = Experiment(name="e", baseline="base", metric="val_loss", lower_is_better=True,
                 variants={"base": [], "wide": ["width=8"]})


def check_evaluation(ev):
    return evaluation_identity(ev) + evaluation_varies_with_seed(ev)


def check_code(ev):
    return mixed_code(ev)


def check_isolation(ev):
    return shared_checkpoint(ev) + writes_outside_run_dir(ev)


def evidence(rows: list[dict], tmp_path, experiment: Experiment = EXP, changes: dict | None = None,
             curves: list[tuple] = ()) -> SweepEvidence:
    """Runs of finished status by default; fp_<key> and final_<metric> columns as load_runs makes them."""
    runs = pd.DataFrame([{"status": "finished", "steps": 6, "final_val_loss": 1.0,
                          "run_id": f"{r['variant']}/{r['seed']}", "run_dir": f"runs/{r['variant']}/seed_{r['seed']}",
                          **r} for r in rows])
    curve = pd.DataFrame(list(curves), columns=["run_id", "variant", "seed", "step", "metric", "value"])
    return SweepEvidence(tmp_path, experiment, runs, curve, changes or {})


def grid(values: dict, key: str, seeds=(0, 1, 2)) -> list[dict]:
    """Rows for variants x seeds; values[variant] is a value or a function of the seed."""
    return [{"variant": v, "seed": s, key: (f(s) if callable(f) else f)} for v, f in values.items() for s in seeds]


# -- evaluation identity ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("key,is_eval", [("data.val_size", True), ("eval.n_examples", True), ("test_split", True),
                                         ("valid_path", True), ("train.eval_batches", True),
                                         ("train.eval_interval", False), ("val_every", False),
                                         ("model.width", False), ("device", False), ("interval", False)])
def test_evaluation_keys_are_named_by_their_words(key, is_eval):
    assert is_evaluation_key(key) is is_eval


def test_one_evaluation_set_is_quiet_and_another_is_not_comparable(tmp_path):
    same = evidence(grid({"base": "aa", "wide": "aa"}, "fp_eval_fingerprint"), tmp_path)
    assert check_evaluation(same) == []
    other = evidence(grid({"base": "aa", "wide": "bb"}, "fp_eval_fingerprint"), tmp_path)
    [f] = check_evaluation(other)
    assert (f.check, f.variants, f.effect.value) == ("evaluation_identity", ("wide",), "not comparable")
    assert "at seeds 0, 1, 2" in f.evidence


def test_a_changed_evaluation_key_is_not_comparable_even_without_fingerprints(tmp_path):
    ev = evidence(grid({"base": 1.0, "wide": 1.0}, "final_val_loss"), tmp_path,
                  changes={"wide": [Change("data.val_size", 2000, 500), Change("model.width", 4, 8)]})
    [f] = check_evaluation(ev)
    assert f.check == "evaluation_identity" and f.evidence == "changes data.val_size: 2000 -> 500"


def test_a_per_seed_evaluation_set_matching_across_arms_is_a_warning(tmp_path):
    ev = evidence(grid({"base": lambda s: f"s{s}", "wide": lambda s: f"s{s}"}, "fp_eval_fingerprint"), tmp_path)
    found = check_evaluation(ev)
    assert [(f.check, f.variants, f.effect.value) for f in found] == [
        ("evaluation_varies_with_seed", ("base",), "warn"), ("evaluation_varies_with_seed", ("wide",), "warn")]


def test_runs_that_recorded_no_fingerprint_are_not_judged(tmp_path):
    rows = grid({"base": "aa"}, "fp_eval_fingerprint") + grid({"wide": math.nan}, "fp_eval_fingerprint")
    assert check_evaluation(evidence(rows, tmp_path)) == []


def test_the_fingerprint_hashes_values_dtypes_and_order():
    ids = np.arange(10)
    assert fingerprint_of(ids) == fingerprint_of(np.arange(10)) != fingerprint_of(ids[::-1])
    assert fingerprint_of(ids) != fingerprint_of(ids.astype(np.int32))
    assert fingerprint_of([1, 2]) != fingerprint_of([1.0, 2.0])
    assert fingerprint_of({"b": 1, "a": [1, "x"]}) == fingerprint_of({"a": [1, "x"], "b": 1})
    with pytest.raises(TypeError, match="not a loader or generator"):
        fingerprint_of(x for x in range(3))


# -- determinism --------------------------------------------------------------------------------------------------

AA = Experiment(name="e", baseline="base", metric="val_loss", lower_is_better=True,
                variants={"base": [], "again": []}, controls=["again"])


def test_an_a_a_control_bitwise_equal_to_the_baseline_is_quiet(tmp_path):
    rows = grid({"base": lambda s: 1.0 + s, "again": lambda s: 1.0 + s}, "final_val_loss")
    assert check_determinism(evidence(rows, tmp_path, AA, changes={"again": []})) == []


def test_an_a_a_control_that_differs_names_the_noise_against_the_seed_spread(tmp_path):
    rows = grid({"base": lambda s: 1.0 + s, "again": lambda s: 1.0 + s + 0.01}, "final_val_loss")
    [f] = check_determinism(evidence(rows, tmp_path, AA, changes={"again": []}))
    assert (f.check, f.variants, f.effect.value) == ("nondeterminism", ("again",), "warn")
    assert "at seeds 0, 1, 2 of 3" in f.evidence and "noise sd 0.00707, 1% of the seed spread (sd 1)" in f.evidence


def test_a_control_equal_in_finals_but_not_in_curves_is_not_deterministic(tmp_path):
    rows = grid({"base": 1.0, "again": 1.0}, "final_val_loss", seeds=(0,))
    curves = [("base/0", "base", 0, 1, "train_loss", 2.0), ("again/0", "again", 0, 1, "train_loss", 2.5),
              ("base/0", "base", 0, 1, "step_time_s", 0.1), ("again/0", "again", 0, 1, "step_time_s", 0.2)]
    [f] = check_determinism(evidence(rows, tmp_path, AA, changes={"again": []}, curves=curves))
    assert "curves differ in 1 pair" in f.evidence and "final" not in f.evidence
    same = [c for c in curves if c[4] == "step_time_s"]                 # timings may differ: not compared
    assert check_determinism(evidence(rows, tmp_path, AA, changes={"again": []}, curves=same)) == []


def test_a_control_that_changes_the_config_is_not_an_a_a_control(tmp_path):
    rows = grid({"base": 1.0, "again": 2.0}, "final_val_loss")
    assert check_determinism(evidence(rows, tmp_path, AA, changes={"again": [Change("lr", 0.1, 0.2)]})) == []


def test_the_probe_is_compared_bitwise_with_its_original(tmp_path):
    rows = grid({"base": lambda s: 1.0 + s}, "final_val_loss")
    rd = RunDir(tmp_path / PROBE / "base" / "seed_1")
    rd.append_metrics({"step": 1, "train_loss": 3.0})
    rd.write_summary(Summary(status=Status.FINISHED, final={"val_loss": 2.0}))
    curves = [("base/1", "base", 1, 1, "train_loss", 3.0)]
    assert check_determinism(evidence(rows, tmp_path, EXP, curves=curves)) == []
    rd.write_summary(Summary(status=Status.FINISHED, final={"val_loss": 2.5}))
    [f] = check_determinism(evidence(rows, tmp_path, EXP, curves=curves))
    assert f.variants == ("base",) and "probe ran base seed 1 again: final differs by up to 0.5" in f.evidence


# -- code provenance ----------------------------------------------------------------------------------------------

def code(commit, dirty=False, script="s1", diff=None):
    return {"fp_code_commit": commit, "fp_code_dirty": dirty, "fp_code_diff": diff, "fp_script_sha256": script}


def test_one_code_is_quiet_even_on_one_dirty_tree(tmp_path):
    rows = [{"variant": v, "seed": s, **code("a" * 40)} for v in ("base", "wide") for s in (0, 1)]
    assert check_code(evidence(rows, tmp_path)) == []
    rows = [{"variant": v, "seed": s, **code("a" * 40, True, diff="d1")} for v in ("base", "wide") for s in (0, 1)]
    assert check_code(evidence(rows, tmp_path)) == []


def test_two_diffs_on_one_commit_are_mixed_code(tmp_path):
    """Uncommitted edits between seeds (the script untouched): the diff of the tree tells the runs apart."""
    rows = [{"variant": v, "seed": s, **code("a" * 40, True, diff="d1" if s == 0 else "d2")}
            for v in ("base", "wide") for s in (0, 1)]
    [f] = check_code(evidence(rows, tmp_path))
    assert f.check == "mixed_code" and "uncommitted changes differ" in f.message
    assert f.evidence.startswith("commit aaaaaaaaaaaa (dirty: diff d1), script s1: base seed 0, wide seed 0;")


def test_seeds_on_two_commits_make_every_comparison_mixed_code(tmp_path):
    rows = [{"variant": v, "seed": s, **code("a" * 40 if s < 2 else "b" * 40)} for v in ("base", "wide")
            for s in range(4)]
    [f] = check_code(evidence(rows, tmp_path))
    assert (f.check, f.effect.value, f.variants) == ("mixed_code", "mixed code", ("base", "wide"))
    assert f.evidence == ("commit aaaaaaaaaaaa, script s1: base seeds 0-1, wide seeds 0-1; "
                          "commit bbbbbbbbbbbb, script s1: base seeds 2-3, wide seeds 2-3")
    assert "commits differ" in f.message


def test_a_variant_on_another_script_alone_is_mixed_code_for_its_comparison_only(tmp_path):
    exp = Experiment(name="e", baseline="base", metric="val_loss", lower_is_better=True,
                     variants={"base": [], "wide": [], "deep": []})
    rows = [{"variant": v, "seed": s, **code("a" * 40, script="s2" if v == "wide" else "s1")}
            for v in ("base", "wide", "deep") for s in (0, 1)]
    [f] = check_code(evidence(rows, tmp_path, exp))
    assert f.variants == ("wide",) and "script hashes differ" in f.message


def test_runs_that_recorded_no_code_are_not_judged(tmp_path):
    assert check_code(evidence(grid({"base": 1.0, "wide": 1.0}, "final_val_loss"), tmp_path)) == []


# -- run isolation ------------------------------------------------------------------------------------------------

def isolated(tmp_path, variant, seed, started, ended, changed_files):
    write_isolation(tmp_path / "runs" / variant / f"seed_{seed}",
                    IsolationRecord(str(tmp_path), started, ended, changed=changed_files))


def test_runs_that_write_one_checkpoint_in_turn_resumed_each_other(tmp_path):
    isolated(tmp_path, "base", 0, 0.0, 1.0, [("ckpt/model.npz", "created", 10)])
    isolated(tmp_path, "wide", 0, 2.0, 3.0, [("ckpt/model.npz", "modified", 10)])
    ev = evidence(grid({"base": 1.0, "wide": 1.0}, "final_val_loss", seeds=(0,)), tmp_path)
    shared, outside = check_isolation(ev)
    assert (shared.check, shared.effect.value, shared.variants) == ("shared_checkpoint", "invalid", ("wide",))
    assert shared.evidence == ("ckpt/model.npz (written by base/seed_0, wide/seed_0); wide/seed_0 started after "
                               "another run wrote it")
    assert (outside.check, outside.effect.value) == ("writes_outside_run_dir", "warn")
    assert "ckpt/model.npz (created/modified during base/seed_0, wide/seed_0)" in outside.evidence


def test_a_checkpoint_one_run_wrote_and_later_runs_found_there_makes_them_invalid(tmp_path):
    """The script resumes from a fixed path: the first run trains and saves, the later ones load it and stop."""
    isolated(tmp_path, "base", 0, 0.0, 1.0, [("model.pt", "created", 10)])
    isolated(tmp_path, "wide", 0, 2.0, 3.0, [])
    isolated(tmp_path, "base", 1, 4.0, 5.0, [("model.pt", "read", 10)])
    ev = evidence(grid({"base": 1.0, "wide": 1.0}, "final_val_loss", seeds=(0, 1)), tmp_path)
    shared, _ = check_isolation(ev)
    assert shared.variants == ("base", "wide")          # the baseline's own numbers are not its own: every arm
    assert "model.pt (written by base/seed_0); base/seed_1, wide/seed_0 started after another run wrote it" \
        == shared.evidence


def test_a_data_file_one_run_wrote_is_shared_only_when_a_later_run_read_it(tmp_path):
    """A cache in a checkpoint's format (.npy) written by the first run: a warning; read by a later run: invalid."""
    isolated(tmp_path, "base", 0, 0.0, 1.0, [("cache/x.npy", "created", 10)])
    isolated(tmp_path, "wide", 0, 2.0, 3.0, [])
    ev = evidence(grid({"base": 1.0, "wide": 1.0}, "final_val_loss", seeds=(0,)), tmp_path)
    assert [f.check for f in check_isolation(ev)] == ["writes_outside_run_dir"]
    isolated(tmp_path, "wide", 0, 2.0, 3.0, [("cache/x.npy", "read", 10)])
    ev = evidence(grid({"base": 1.0, "wide": 1.0}, "final_val_loss", seeds=(0,)), tmp_path)
    assert [f.check for f in check_isolation(ev)] == ["shared_checkpoint", "writes_outside_run_dir"]


def test_runs_that_overlap_in_time_are_not_said_to_share_what_one_wrote(tmp_path):
    isolated(tmp_path, "base", 0, 0.0, 2.0, [("model.pt", "created", 10)])
    isolated(tmp_path, "wide", 0, 1.0, 3.0, [("model.pt", "created", 10)])
    found = check_isolation(evidence(grid({"base": 1.0, "wide": 1.0}, "final_val_loss", seeds=(0,)), tmp_path))
    assert [f.check for f in found] == ["writes_outside_run_dir"]


def test_no_change_outside_the_run_dirs_is_quiet(tmp_path):
    isolated(tmp_path, "base", 0, 0.0, 1.0, [])
    assert check_isolation(evidence(grid({"base": 1.0}, "final_val_loss", seeds=(0,)), tmp_path)) == []


def test_a_run_dir_linked_out_of_the_sweep_dir_is_not_followed(tmp_path):
    outside = tmp_path / "elsewhere"
    write_isolation(outside, IsolationRecord(str(tmp_path), 0.0, 1.0, changed=[("x.pt", "created", 1)]))
    sweep_dir = tmp_path / "sweep"
    (sweep_dir / "runs" / "base").mkdir(parents=True)
    os.symlink(outside, sweep_dir / "runs" / "base" / "seed_0")
    assert read_isolation(sweep_dir / "runs" / "base" / "seed_0") is not None          # the link is there
    assert check_isolation(evidence(grid({"base": 1.0}, "final_val_loss", seeds=(0,)), sweep_dir)) == []


def test_the_folder_snapshot_watches_hidden_folders_skips_vcs_environments_sweep_dirs_and_follows_no_link(tmp_path):
    (tmp_path / "a.txt").write_text("1")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x").write_text("1")
    (tmp_path / ".cache" / "state").mkdir(parents=True)                 # hidden: watched like any folder
    (tmp_path / ".cache" / "state" / "s.json").write_text("1")
    (tmp_path / ".mypy_cache").mkdir()                                   # an editor's linter: skipped
    (tmp_path / ".mypy_cache" / "m.json").write_text("1")
    for env, mark in ((".venv", "pyvenv.cfg"), ("env", "conda-meta")):   # environments: skipped
        (tmp_path / env / "lib").mkdir(parents=True)
        (tmp_path / env / mark).mkdir() if mark == "conda-meta" else (tmp_path / env / mark).write_text("")
        (tmp_path / env / "lib" / "m.py").write_text("1")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "m.pyc").write_text("1")
    (tmp_path / "sweeps" / "s").mkdir(parents=True)
    (tmp_path / "sweeps" / "s" / "sweep.json").write_text("{}")
    (tmp_path / "sweeps" / "s" / "runs.txt").write_text("1")
    (tmp_path / "sweeps" / "journal.md").write_text("1")              # the sweeper's journal beside the sweeps
    outside = tmp_path.parent / f"{tmp_path.name}_outside"
    outside.mkdir()
    (outside / "big.bin").write_text("1")
    os.symlink(outside, tmp_path / "link")
    before = snapshot(tmp_path)
    assert set(before) == {"a.txt", "link", ".cache/state/s.json"}
    (tmp_path / "b.pt").write_text("22")
    (tmp_path / "a.txt").write_text("333")
    os.remove(tmp_path / "link")
    assert changed(before, snapshot(tmp_path)) == [("a.txt", "modified", 3), ("b.pt", "created", 2),
                                                   ("link", "deleted", before["link"][0])]


def test_a_read_after_the_last_write_is_seen_by_its_access_time_and_listed_after_the_writes(tmp_path):
    for name in ("model.pt", "notes.txt", "data.txt"):
        (tmp_path / name).write_text("w")
        os.utime(tmp_path / name, ns=(1_000, 2_000))            # read long ago, written later
    os.utime(tmp_path / "data.txt", ns=(3_000, 2_000))          # read since its last write (by an earlier run)
    before = snapshot(tmp_path)
    for name in ("model.pt", "notes.txt", "data.txt"):
        os.utime(tmp_path / name, ns=(5_000, 2_000))            # what strictatime shows of a read (relatime: the
    (tmp_path / "out.txt").write_text("o")                      # first two only)
    assert changed(before, snapshot(tmp_path)) == [("out.txt", "created", 1), ("model.pt", "read", 1),
                                                   ("notes.txt", "read", 1)]   # data.txt: read before, not again


def test_a_folder_past_the_bound_is_not_watched(tmp_path, monkeypatch):
    monkeypatch.setattr("sweeper.run.observed.folder_watch.MAX_FILES", 3)
    for i in range(5):
        (tmp_path / f"f{i}").write_text("x")
    assert snapshot(tmp_path) is None and changed(None, {}) is None


# -- the run-side records -----------------------------------------------------------------------------------------

def test_the_script_of_a_command(tmp_path):
    (tmp_path / "train.py").write_text("x = 1\n")
    (tmp_path / "run.sh").write_text("echo\n")
    assert script_of(["python", "train.py", "--lr=1"], tmp_path) == str(tmp_path / "train.py")
    assert script_of(["python3", "-u", "train.py"], tmp_path) == str(tmp_path / "train.py")
    assert script_of(["bash", "run.sh"], tmp_path) == str(tmp_path / "run.sh")
    assert script_of(["python", "-m", "json.tool"], tmp_path).endswith("json/tool.py")
    assert script_of(["python", "missing.py"], tmp_path) is None
    assert file_sha256(tmp_path / "train.py") != file_sha256(tmp_path / "run.sh")


def test_every_check_of_these_classes_is_registered(tmp_path):
    rows = [{"variant": v, "seed": s, "final_val_loss": 1.0, **code("a" * 40 if s else "b" * 40),
             "fp_eval_fingerprint": "x" if v == "base" else "y"} for v in ("base", "wide") for s in (0, 1)]
    found = {f.check for f in check_sweep(evidence(rows, tmp_path))}
    assert {"evaluation_identity", "mixed_code"} <= found
    silenced = check_sweep(evidence(rows, tmp_path), {"mixed_code": "a compute-scaling study"})
    assert [f.silenced for f in silenced if f.check == "mixed_code"] == ["a compute-scaling study"]


def test_the_changes_table_marks_the_keys_that_change_the_evaluation():
    from sweeper.report.changes import markdown_section, terminal_lines

    changes = {"small": [Change("data.val_size", 2000, 500)], "wide": [Change("model.width", 4, 8)]}
    lines = terminal_lines(changes, {}, "base")
    assert lines[1].endswith("(changes the evaluation: data.val_size)") and "evaluation" not in lines[2]
    md = "\n".join(markdown_section(changes, {}, "base"))
    assert "`data.val_size` (evaluation)" in md and "`model.width` |" in md
