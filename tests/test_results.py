"""The loader on real sweep dirs written to disk: every planned run is a row, broken files never crash it.

    python -m pytest -q tests/test_results.py
"""
import json

import numpy as np
import pytest

from sweeper.analysis.results import load_curves, load_experiment, load_manifest, load_runs
from sweeper.run.files.experiment import Experiment
from sweeper.run.files.reading import UnreadableFile
from tests.helpers.synthetic_sweep import write_sweep


@pytest.fixture
def sweep(tmp_path):
    return write_sweep(tmp_path / "s", {"rope": [3.0, 3.1, 3.2], "nope": [3.5, None, 3.6],
                                        "frozen": [3.3, 3.4, float("nan")]},
                       status={("frozen", 1): "missing", ("nope", 2): "interrupted", ("rope", 2): "failed"},
                       health={("frozen", 0): "fail"}, curve_points=10, eval_every=5)


def test_one_row_per_planned_run_with_status_metrics_health_and_fingerprint(sweep):
    runs = load_runs(sweep, load_manifest(sweep))
    assert len(runs) == 9
    assert list(runs["variant"].unique()) == ["rope", "nope", "frozen"]         # manifest order
    by = runs.set_index(["variant", "seed"])
    assert by.loc[("rope", 0), "status"] == "finished" and by.loc[("rope", 0), "final_val_loss"] == 3.0
    assert by.loc[("rope", 2), "status"] == "failed" and np.isnan(by.loc[("rope", 2), "final_val_loss"])
    assert by.loc[("nope", 1), "status"] == "diverged"
    assert by.loc[("nope", 2), "status"] == "interrupted"
    assert by.loc[("frozen", 1), "status"] == "missing"                         # planned, never started
    assert by.loc[("frozen", 2), "status"] == "finished" and np.isnan(by.loc[("frozen", 2), "final_val_loss"])
    assert by.loc[("frozen", 0), "health"] == "fail" and by.loc[("frozen", 0), "health_failed"] == "qk_grad_nonzero"
    assert by.loc[("rope", 1), "fp_data_order_hash"] == "order-1"
    assert by.loc[("rope", 1), "fp_corpus_hash"] == "c0ffee"
    assert by.loc[("rope", 1), "run_id"] == "rope-s1" and by.loc[("rope", 1), "steps"] == 100
    assert by.loc[("rope", 2), "error"] == "failed at step 50"
    assert (runs["problems"] == "").all() and runs.attrs["damaged"] == []


def test_experiment_from_manifest(sweep):
    exp, notes = load_experiment(sweep, load_manifest(sweep))
    assert isinstance(exp, Experiment)
    assert (exp.name, exp.baseline, exp.metric, exp.lower_is_better) == ("synthetic", "rope", "val_loss", True)
    assert list(exp.variants) == ["rope", "nope", "frozen"] and notes == []


def test_curves_long_table_matches_the_written_lines(sweep):
    curves = load_curves(sweep, load_runs(sweep, load_manifest(sweep)))
    assert list(curves.columns) == ["run_id", "variant", "seed", "step", "metric", "value"]
    written = [json.loads(line) for line in (sweep / "runs/rope/seed_0/metrics.jsonl").read_text().splitlines()]
    mine = curves[curves["run_id"] == "rope-s0"]
    for metric in ("train_loss", "grad_norm", "val_loss", "lr"):
        expected = [(r["step"], r[metric]) for r in written if metric in r]
        got = mine[mine["metric"] == metric][["step", "value"]].itertuples(index=False, name=None)
        assert list(got) == expected
    assert set(curves[curves["metric"] == "val_loss"]["step"]) == {50, 100}     # eval steps only
    assert "frozen-s1" not in set(curves["run_id"])                            # missing run: no curve


def test_a_step_logged_twice_keeps_its_last_value_and_the_earlier_one_is_kept_aside(sweep):
    path = sweep / "runs/rope/seed_0/metrics.jsonl"
    last = json.loads(path.read_text().splitlines()[-1])
    path.write_text(path.read_text() + json.dumps({"step": last["step"], "val_loss": 0.5}) + "\n")   # a final line
    curves = load_curves(sweep, load_runs(sweep, load_manifest(sweep)))
    val = curves[(curves["run_id"] == "rope-s0") & (curves["metric"] == "val_loss")]
    assert val["value"].iloc[-1] == 0.5 and val["step"].is_unique
    assert curves.attrs["overwritten"] == (("rope-s0", "rope", 0, last["step"], "val_loss", last["val_loss"]),)


def test_truncated_last_line_and_corrupt_files_are_named_never_skipped_silently(sweep):
    rope0, rope1, nope0 = (sweep / "runs" / v / f"seed_{k}" for v, k in (("rope", 0), ("rope", 1), ("nope", 0)))
    path = rope0 / "metrics.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines) + '\n{"step": 110, "train_lo')             # writer killed mid-line
    (rope1 / "summary.json").write_text('{"run_id": "rope-s1", "final": {"val_l')
    (nope0 / "status.json").write_text("not json at all")
    (nope0 / "health.json").write_bytes(b"\x00\xff")
    runs = load_runs(sweep, load_manifest(sweep))
    curves = load_curves(sweep, runs)
    assert curves[curves["run_id"] == "rope-s0"]["step"].max() == 100           # the 10 good lines survive
    assert curves.attrs["damaged"] == [f"{rope0 / 'metrics.jsonl'}: 1 truncated or corrupt line(s) skipped"]
    by = runs.set_index(["variant", "seed"])
    assert f"{rope0 / 'metrics.jsonl'}: 1 truncated or corrupt line(s) skipped" == by.loc[("rope", 0), "problems"]
    assert f"{rope1 / 'summary.json'}: the run summary is not valid JSON" in by.loc[("rope", 1), "problems"]
    # the status says finished, the summary cannot be read: no metric, the damage is named, and the run is
    # unknown (neither usable nor a lost seed that would count against its variant)
    assert by.loc[("rope", 1), "status"] == "unknown" and np.isnan(by.loc[("rope", 1), "final_val_loss"])
    assert by.loc[("rope", 1), "error"].startswith(f"unreadable summary: {rope1 / 'summary.json'}")
    assert by.loc[("nope", 0), "status"] == "finished"                         # its summary says so
    assert f"{nope0 / 'status.json'}: the run status is not valid JSON" in by.loc[("nope", 0), "problems"]
    assert f"{nope0 / 'health.json'}: not a readable health report" in by.loc[("nope", 0), "problems"]
    damaged = runs.attrs["damaged"]
    assert len(damaged) == 3 and all(any(str(f) in d for d in damaged) for f in
                                     (rope1 / "summary.json", nope0 / "status.json", nope0 / "health.json"))


def test_a_status_that_is_not_a_status_word_is_damage(sweep):
    rd = sweep / "runs/rope/seed_0"
    (rd / "status.json").write_text(json.dumps({"status": "done"}))
    (rd / "summary.json").unlink()
    runs = load_runs(sweep, load_manifest(sweep)).set_index(["variant", "seed"])
    assert runs.loc[("rope", 0), "status"] == "unknown"
    assert "status 'done' is not one of pending, running, finished" in runs.loc[("rope", 0), "problems"]


def test_a_damaged_manifest_raises_naming_it(sweep):
    (sweep / "sweep.json").write_text('{"experiment": {"name": "x"')
    with pytest.raises(UnreadableFile, match="sweep.json: the sweep manifest is not valid JSON"):
        load_manifest(sweep)


def test_failed_run_with_an_unhelpful_error_gets_its_log_tail(tmp_path):
    log = "step 10\nTraceback (most recent call last):\n  File \"x.py\", line 3\nZeroDivisionError: division by zero\n"
    root = write_sweep(tmp_path / "s", {"a": [1.0, 2.0, 3.0]}, status={("a", 1): "failed", ("a", 2): "failed"},
                       errors={("a", 1): "exit status 1", ("a", 2): "ValueError: bad lr"},
                       logs={("a", 1): log, ("a", 2): log})
    by = load_runs(root, load_manifest(root)).set_index("seed")
    assert by.loc[1, "error"] == "exit status 1"
    assert by.loc[1, "log_tail"].splitlines()[-1] == "ZeroDivisionError: division by zero"
    assert by.loc[2, "log_tail"] == "" and by.loc[0, "log_tail"] == ""           # a telling error, a finished run


def test_without_manifest_runs_are_discovered_and_no_baseline_is_recorded(tmp_path):
    root = write_sweep(tmp_path / "s", {"a": [1.0, 2.0], "b": [1.5, 2.5]}, write_manifest_file=False)
    runs = load_runs(root, load_manifest(root))
    assert sorted(zip(runs["variant"], runs["seed"])) == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert set(runs["status"]) == {"finished"}
    exp, notes = load_experiment(root, load_manifest(root))
    assert exp.metric == "val_loss" and exp.lower_is_better and exp.baseline == ""
    assert notes and "has no manifest" in notes[0]


def test_partial_sweep_with_pending_and_running_runs(tmp_path):
    root = write_sweep(tmp_path / "s", {"a": [1.0, 2.0, 3.0]}, status={("a", 1): "running", ("a", 2): "pending"})
    runs = load_runs(root, load_manifest(root))
    assert list(runs["status"]) == ["finished", "running", "pending"]
    curves = load_curves(root, runs)
    assert curves[curves["seed"] == 1]["step"].max() == 100                      # half the curve so far


def test_missing_sweep_dir_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_manifest(tmp_path / "nope")


def test_load_manifest_reads_the_file_as_it_is_now(tmp_path):
    """No cache: a replaced manifest is read as replaced, a damaged one is UnreadableFile, a missing one None
    (a report reads it once and passes it down: tests/test_decision_options.py counts the reads)."""
    import dataclasses

    from sweeper.run.files.manifest import MANIFEST, write_manifest

    root = write_sweep(tmp_path / "s", {"a": [1.0, 1.1, 1.2], "b": [2.0, 2.1, 2.2]}, baseline="a")
    first = load_manifest(root)
    renamed = dataclasses.replace(first, experiment=dataclasses.replace(first.experiment, name="renamed"))
    write_manifest(root, renamed)
    assert load_manifest(root).experiment.name == "renamed"
    path = root / MANIFEST
    path.write_text("{ not json")
    with pytest.raises(UnreadableFile):
        load_manifest(root)
    path.unlink()
    assert load_manifest(root) is None
