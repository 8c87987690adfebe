"""A zero-glue run's metrics are read as streams, under a real memory limit (issue 40): a 30 MB predictions.csv in
{out_dir} costs a row at a time, and is not read at all when stdout already carries the decision metric.

    python -m pytest -q -n 0 tests/test_reported_memory.py
"""
from __future__ import annotations

import json

import pytest

from sweeper.run.observed.reported import read_reported
from tests.helpers.glue import glue_project, sweep

# The script caps its own address space (RLIMIT_AS) at what it uses now plus 150 MB: reading a 30 MB CSV whole
# (its text, then a dict per row) does not fit; a row at a time does. sweeper.run.command reads the metrics in
# the same process, after the script, under the same limit.
LIMITED = """import resource
column = {column!r}
vm = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmSize:')) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + 150 * 2**20, vm + 150 * 2**20))
with open(os.path.join(args.out, 'predictions.csv'), 'w') as f:
    f.write(f'id,label,{{column}}\\n')
    row = 0
    while f.tell() < 30 * 2**20:
        f.write(''.join(f'{{row + i}},cat,0.{{i:06d}}\\n' for i in range(10000)))
        row += 10000
"""


@pytest.mark.slow
@pytest.mark.parametrize("where", ["stdout", "csv"])
def test_a_30_mb_predictions_csv_under_a_memory_limit(tmp_path, where):
    """stdout: the metric is printed, the CSV is skipped (named in the log). csv: the metric is a column of a
    large CSV (the last row's value wins), read a row at a time."""
    if where == "stdout":
        script = LIMITED.format(column="score") + "print(json.dumps({'val_loss': 0.25}))\n"
    else:
        script = LIMITED.format(column="val_loss")
    project = glue_project(tmp_path, script)
    named = ["task.metrics=[stdout,predictions.csv]"] if where == "csv" else []   # not a metrics file by name
    proc = sweep(project, "seeds=0", *named, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = project / "sweep" / "runs" / "a" / "seed_0"
    final = json.loads((run / "summary.json").read_text())["final"]
    assert final["val_loss"] == (0.25 if where == "stdout" else 0.009999)
    log = (run / "stdout.log").read_text()
    assert "MemoryError" not in log
    if where == "stdout":
        assert "not read for metrics (not a metrics file by name): predictions.csv" in log


def test_large_out_files_are_read_only_when_they_can_hold_the_metric(tmp_path):
    big = "id,score\n" + "".join(f"{i},0.5\n" for i in range(200000))
    (tmp_path / "metrics.csv").write_text(big)                               # > 1 MiB, no val_loss column
    (tmp_path / "metrics.json").write_text(json.dumps({"val_acc": 0.9}))     # small: always read
    got = read_reported("", ["stdout"], None, base=tmp_path, out_dir=tmp_path, metric="val_loss")
    final, notes = got.final, got.notes
    assert final == {"val_acc": 0.9}
    assert any("metrics.csv in out/ not read" in n and "cannot hold val_loss" in n for n in notes), notes
    final = read_reported("", ["stdout"], None, base=tmp_path, out_dir=tmp_path, metric="score").final
    assert final["score"] == 0.5 and final["id"] == 199999
