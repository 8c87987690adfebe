"""The experiment journal: every report records its sweep's entry (hypothesis, commit, what changed, seeds,
verdict and interval, health), re-reporting updates it, conclusions stay, list/search filter, damage is named."""
from __future__ import annotations

import json
import subprocess
from multiprocessing import get_context

import pandas as pd
import pytest
import yaml

from sweeper.report import journal
from sweeper.run.files.manifest import read_manifest
from tests.helpers.commands import ROOT, run_sweeper
from tests.helpers.local_pool import run, user_project

TASK = """
import sweeper
run = sweeper.init()
run.log(1, loss=1.0)
run.finish(val_loss=1.0 + run.config.lr + 0.01 * ((run.seed * 7 + int(run.config.lr * 10)) % 5))
"""


def _project(tmp_path):
    project = user_project(tmp_path / "project", TASK, {"base": [], "high": ["lr=0.5"]}, "lr: 0.1")
    exp = project / "conf" / "experiment" / "mine.yaml"
    exp.write_text(exp.read_text().replace("  lower_is_better: true\n", "  lower_is_better: true\n"
                                           "  hypothesis: a higher learning rate hurts\n"
                                           "  notes: {high: five times the lr}\n"))
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t", "-C", str(project)]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "init"], check=True)
    head = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    return project, head


def _sweep(project, d, *extra):
    proc = run(["--config-dir", "conf", "+experiment=mine", "seeds=0-2", f"sweeper.dir={d}", *extra], cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.mark.slow
def test_a_reported_sweep_records_one_entry_and_reporting_again_updates_it(tmp_path):
    project, head = _project(tmp_path)
    d = tmp_path / "sweeps" / "mine-1"
    proc = _sweep(project, d)
    assert f"journal: {tmp_path / 'sweeps' / 'journal.md'}" in proc.stdout
    assert "what each variant changes vs base:\n  high: lr: 0.1 -> 0.5\n" in proc.stdout
    [entry] = journal.read_entries(tmp_path / "sweeps")
    assert (entry["experiment"], entry["hypothesis"], entry["sweep"], entry["baseline"]) == \
        ("mine", "a higher learning rate hurts", "mine-1", "base")
    assert entry["code"] == {"commit": head, "dirty": False, "source": "runs"}
    base, high = entry["variants"]
    assert (base["variant"], base["role"], base["seeds"], base["usable"]) == ("base", "baseline", [0, 1, 2], 3)
    csv = pd.read_csv(d / "summary.csv").set_index("variant")
    assert (high["verdict"], high["changes"], high["note"], high["seeds"]) == \
        ("worse", "lr: 0.1 -> 0.5", "five times the lr", [0, 1, 2])
    assert high["delta"] == round(csv.loc["high", "delta"], 6)
    assert (high["ci_low"], high["ci_high"]) == (round(csv.loc["high", "decision_ci_low"], 6),
                                                 round(csv.loc["high", "decision_ci_high"], 6))
    assert csv.loc["high", "changes"] == "lr: 0.1 -> 0.5" and csv.loc["high", "n_changes"] == 1
    assert csv.loc["high", "changed_keys"] == "lr"
    md = (tmp_path / "sweeps" / "journal.md").read_text()
    assert "- hypothesis: a higher learning rate hurts" in md and f"- code: {head[:12]};" in md
    assert "| high | lr: 0.1 -> 0.5 | 0-2 (3/3 usable) | worse |" in md
    report = (d / "report.md").read_text()
    assert "| high | lr=0.5 | `lr` | optimizer | `0.1` | `0.5` |" in report
    assert "hypothesis: a higher learning rate hurts" in report

    concluded = run(["--journal", str(tmp_path / "sweeps"), "conclude", "mine-1", "lr 0.5 is too high"],
                    module="sweeper.journal")
    assert concluded.returncode == 0, concluded.stderr
    again = run([str(d), "--no-plots"], module="sweeper.report")
    assert again.returncode == 0, again.stderr
    [updated] = journal.read_entries(tmp_path / "sweeps")
    assert updated["created"] == entry["created"] and updated["conclusion"] == "lr 0.5 is too high"
    assert "Conclusion: lr 0.5 is too high" in (tmp_path / "sweeps" / "journal.md").read_text()


@pytest.mark.slow
def test_list_and_search_filter_entries_and_a_damaged_line_is_named(tmp_path):
    folder = tmp_path / "j"
    for i, (exp, variant, day) in enumerate([("rope", "nope", "2026-11-01"), ("rope", "frozen", "2026-12-02"),
                                             ("mlp", "wide", "2026-12-03")]):
        journal.record(folder, {"id": f"id{i}", "sweep": f"{exp}-{i}", "experiment": exp, "created": f"{day} 10:00:00",
                                "variants": [{"variant": "base", "role": "baseline"},
                                             {"variant": variant, "verdict": "worse"}], "conclusion": None})

    def cli(*args):
        return run(["--journal", str(folder), *args], module="sweeper.journal")

    assert [line.split()[2] for line in cli("list", "--experiment", "rope").stdout.splitlines()] == ["rope-0", "rope-1"]
    assert [line.split()[2] for line in cli("list", "--variant", "wide").stdout.splitlines()] == ["mlp-2"]
    assert [line.split()[2] for line in cli("list", "--since", "2026-12-01", "--until", "2026-12-02")
            .stdout.splitlines()] == ["rope-1"]
    assert [line.split()[2] for line in cli("search", "FROZEN").stdout.splitlines()] == ["rope-1"]
    assert json.loads(cli("show", "mlp-2").stdout)["experiment"] == "mlp"
    bad = cli("show", "nothing")
    assert bad.returncode == 2 and "'nothing' is not in the journal" in bad.stderr
    assert cli("list", "--since", "yesterday").returncode == 2
    with open(folder / "journal.jsonl", "a") as f:
        f.write('{"id": "half-writ\n')
    damaged = cli("list")
    assert damaged.returncode == 2
    assert (
        damaged.stderr.startswith(f"sweeper.journal: error: {folder / 'journal.jsonl'}") and "line 4" in damaged.stderr
    )


def _record_many(args):
    folder, who = args
    for i in range(15):
        journal.record(folder, {"id": f"{who}-{i}", "sweep": f"{who}-{i}", "created": "2026-12-03 00:00:00"})


def test_concurrent_reports_never_lose_an_entry(tmp_path):
    with get_context("spawn").Pool(2) as pool:
        pool.map(_record_many, [(tmp_path, "a"), (tmp_path, "b")])
    ids = [e["id"] for e in journal.read_entries(tmp_path)]
    assert sorted(ids) == sorted([f"{w}-{i}" for w in "ab" for i in range(15)])


@pytest.mark.slow
def test_journal_off_writes_none_and_a_chosen_journal_is_kept_for_later_reports(tmp_path):
    project, _ = _project(tmp_path)
    off = tmp_path / "sweeps" / "off"
    _sweep(project, off, "sweeper.journal=off")
    assert not (tmp_path / "sweeps" / "journal.jsonl").exists()
    chosen, d = tmp_path / "notes", tmp_path / "sweeps" / "kept"
    _sweep(project, d, f"sweeper.journal={chosen}")
    assert read_manifest(d).extra["journal"] == str(chosen)
    assert run([str(d), "--no-plots"], module="sweeper.report").returncode == 0
    assert [e["sweep"] for e in journal.read_entries(chosen)] == ["kept"]
    assert not (tmp_path / "sweeps" / "journal.jsonl").exists()


@pytest.mark.slow
def test_a_damaged_journal_never_costs_the_report(tmp_path):
    project, _ = _project(tmp_path)
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "journal.jsonl").write_text("not json\n")
    proc = _sweep(project, tmp_path / "sweeps" / "s")
    assert (tmp_path / "sweeps" / "s" / "report.md").is_file()
    assert f"WARNING: the journal was not updated: {tmp_path / 'sweeps' / 'journal.jsonl'}: line 1" in proc.stdout


@pytest.mark.slow
def test_the_rope_experiment_states_its_hypothesis_and_a_line_per_variant():
    exp = yaml.safe_load((ROOT / "conf" / "experiment" / "rope.yaml").read_text())["experiment"]
    assert exp["hypothesis"] and set(exp["notes"]) == set(exp["variants"])
    proc = run_sweeper("+experiment=rope", "seeds=0", "sweeper.dry_run=true")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
