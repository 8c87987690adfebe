"""State shared between runs through the project folder (check `shared_state`, issue 45 item 8): hidden folders
are watched, and a file one run wrote that a later run read or wrote again is named, beside the verdicts of the
later runs' arms; a healthy twin that keeps its state in its own run dir stays quiet.

    python -m pytest -q -n 0 -p no:cacheprovider tests/test_shared_state.py
"""
from __future__ import annotations

import json

import pytest

from sweeper.analysis.integrity.records.shared_state import shared_state
from sweeper.run.files.isolation import IsolationRecord, write_isolation
from tests.helpers.integrity_evidence_projects import findings_of, make_project, sweep
from tests.test_integrity_evidence_checks import evidence, grid


def isolated(tmp_path, variant, seed, started, ended, changed_files):
    write_isolation(tmp_path / "runs" / variant / f"seed_{seed}",
                    IsolationRecord(str(tmp_path), started, ended, changed=changed_files))


def two_runs(tmp_path):
    return evidence(grid({"base": 1.0, "wide": 1.0}, "final_val_loss", seeds=(0,)), tmp_path)


def test_a_hidden_file_one_run_wrote_and_a_later_run_read_is_named_beside_the_later_arm(tmp_path):
    isolated(tmp_path, "base", 0, 0.0, 1.0, [(".cache/stats.json", "created", 10)])
    isolated(tmp_path, "wide", 0, 2.0, 3.0, [(".cache/stats.json", "read", 10)])
    [found] = shared_state(two_runs(tmp_path))
    assert (found.check, found.effect.value, found.variants) == ("shared_state", "warn", ("wide",))
    assert found.evidence == "1 file(s): .cache/stats.json: read by wide/seed_0 (after base/seed_0)"
    assert "a later run read a file an earlier run wrote" in found.message


def test_a_file_rewritten_by_a_later_run_of_the_baseline_concerns_every_comparison(tmp_path):
    isolated(tmp_path, "wide", 0, 0.0, 1.0, [(".state/counter", "created", 1)])
    isolated(tmp_path, "base", 0, 2.0, 3.0, [(".state/counter", "modified", 1)])
    [found] = shared_state(two_runs(tmp_path))
    assert found.variants == ("base", "wide") and "rewritten by base/seed_0 (after wide/seed_0)" in found.evidence
    assert "wrote again" in found.message


def test_runs_that_overlap_in_time_share_nothing(tmp_path):
    """Both wrote the file while both ran: neither ran after the other."""
    isolated(tmp_path, "base", 0, 0.0, 2.0, [(".cache/stats.json", "created", 10)])
    isolated(tmp_path, "wide", 0, 1.0, 3.0, [(".cache/stats.json", "created", 10)])
    assert shared_state(two_runs(tmp_path)) == []


def test_checkpoint_like_files_are_left_to_shared_checkpoint_and_unread_files_are_not_shared(tmp_path):
    isolated(tmp_path, "base", 0, 0.0, 1.0, [(".cache/model.pt", "created", 10), ("log.txt", "created", 1)])
    isolated(tmp_path, "wide", 0, 2.0, 3.0, [(".cache/model.pt", "read", 10)])
    assert shared_state(two_runs(tmp_path)) == []


# -- through the real CLI ------------------------------------------------------------------------------------------

READ_MODIFY_WRITE = '''
state = {path!r}
os.makedirs(os.path.dirname(state), exist_ok=True)
seen = open(state).read() if os.path.exists(state) else ""
open(state, "w").write(seen + str(cfg.seed))
w = w + 0.01 * len(seen)                              # the run's numbers hang on what ran before it
'''
CACHE_ONCE = '''
stats = os.path.join({folder}, ".cache", "stats.json")
if os.path.exists(stats):                             # written by the first run, read by every later one
    scale = json.load(open(stats))["scale"]
else:
    os.makedirs(os.path.dirname(stats), exist_ok=True)
    scale = float(cfg.seed + 1)
    json.dump({{"scale": scale}}, open(stats, "w"))
w = w * scale
'''


def verdict_line(proc, variant: str) -> str:
    [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith(f"{variant} vs base: ")]
    return line


@pytest.mark.slow
@pytest.mark.parametrize("twin", [False, True])
def test_state_in_a_hidden_folder_read_and_rewritten_by_later_runs_api(tmp_path, twin):
    """Run API: each run reads .cache/state.txt, adds to it and writes it back; the twin keeps it in its run dir."""
    path = "os.path.join(run.dir.path, 'out', '.cache', 'state.txt')" if twin else "'.cache/state.txt'"
    extra = READ_MODIFY_WRITE.format(path="@").replace("'@'", path)
    project = make_project(tmp_path, "api", extra=extra)
    proc, sweep_dir = sweep(project, "seeds=0-1", "launcher.max_parallel=1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    found = {f.check: f for f in findings_of(sweep_dir)}
    record = json.loads((sweep_dir / "integrity.json").read_text())
    if twin:
        assert found == {}, found
        assert "shared_state" not in proc.stdout and "warning" not in verdict_line(proc, "wide")
        return
    assert set(found) == {"shared_state", "writes_outside_run_dir"}, found
    assert ".cache/state.txt: rewritten by" in found["shared_state"].evidence
    assert set(found["shared_state"].variants) == {"base", "wide"}
    assert "warning: shared_state" in verdict_line(proc, "wide")
    assert "  shared_state [warn] (base, wide): 1 file(s): .cache/state.txt" in proc.stdout
    md = (sweep_dir / "report.md").read_text()
    assert "| shared_state |" in md[md.index("## Checks across runs"):]
    assert [f["check"] for f in record["findings"]] == ["writes_outside_run_dir", "shared_state"]


@pytest.mark.slow
@pytest.mark.parametrize("twin", [False, True])
def test_a_cache_the_first_run_wrote_and_later_runs_only_read_command(tmp_path, twin):
    """A plain script: the first run writes .cache/stats.json, every later run only reads it (seen by its access
    time); the twin writes its cache under {out_dir}."""
    project = make_project(tmp_path, "command", extra=CACHE_ONCE.format(folder="cfg.out" if twin else "'.'"))
    proc, sweep_dir = sweep(project, "seeds=0-1", "launcher.max_parallel=1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    found = {f.check: f for f in findings_of(sweep_dir)}
    if twin:
        assert found == {}, found
        return
    assert set(found) == {"shared_state", "writes_outside_run_dir"}, found
    evidence_line = found["shared_state"].evidence
    assert evidence_line.startswith("1 file(s): .cache/stats.json: read by ") and "(after base/seed_0)" in \
        evidence_line, evidence_line
    assert "a later run read a file an earlier run wrote" in found["shared_state"].message
    assert "warning: shared_state" in verdict_line(proc, "wide")
