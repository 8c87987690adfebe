"""A run's reported metric lines are ingested at C speed, the same records as line by line (issue 48, scale;
figures: benchmarks/bench_ingest.py).

    python -m pytest -q -n 0 tests/test_ingest.py
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sweeper.run.files.atomic import append_jsonl, append_jsonl_many
from sweeper.run.observed.reported import iter_json_objects, read_reported, text_objects
from tests.helpers.local_pool import child_env, user_project

TRICKY = "\n".join([
    '{"step": 1, "loss": 0.5}',
    '  {"step": 2, "loss": 0.25}  ',
    'progress 10%\r{"step": 3, "loss": 0.125}',             # a progress bar's carriage return, then a line
    '{"step": 4, "nested": {"a": 1, "b": {"c": 2}}}',
    '{"step": 5, "loss": 1}, {"step": 6, "loss": 2}',        # two objects on one line: not one JSON object
    '{"step": 7, "note": "a }, { inside"}',
    '{"step": 8, "broken": ',
    '{not json}',
    '[1, 2]',
    '{"val_loss": NaN}',
    '{"val_loss": 0.41}\r\n{"step": 9, "loss": 1e-3}',
    '',
])


@pytest.mark.parametrize("text", [TRICKY, TRICKY.replace("\n{not json}", ""), TRICKY + "\x0c{\"x\": 1}\n",
                                  '{"a": 1}\n' * 3])
def test_the_fast_parse_finds_the_lines_objects_and_numbers_line_by_line_does(text):
    objects, number = text_objects(text)
    got = [(number(n), line, obj) for n, line, obj in objects]
    want = list(iter_json_objects(text.splitlines()))
    assert json.dumps(got) == json.dumps(want)           # NaN included


def test_read_reported_names_the_line_of_each_final_as_before():
    got = read_reported(TRICKY, ["stdout"], None, base=None)
    assert got.final["val_loss"] == 0.41 and got.final["nested.b.c"] == 2 and "step" not in got.final
    assert got.sources["val_loss"].startswith("stdout line 12 of the run's output `{\"val_loss\": 0.41}`")
    assert got.sources["val_loss"].endswith(": the last of 2 values")
    assert got.sources["note"] == ("stdout line 7 of the run's output `{\"step\": 7, \"note\": \"a }, { inside\"}`, "
                                   "key note (step 7): the only value")
    assert [r["step"] for r in got.steps] == [1, 2, 3, 4, 7, 9]


@pytest.mark.parametrize("records", [
    [{"step": i, "loss": 1 / (i + 1), "lr": 1e-3} for i in range(50)],
    [{"step": 1, "note": "x }, { y"}, {"step": 2, "loss": 0.5}],          # a boundary inside a string
    [{"step": 1, "d": {"a": 1}, "e": [{"b": 2}, {"c": 3}]}, {"step": 2, "z": float("nan")}],
    [{"step": 3, "loss": 0.1}],
])
def test_many_lines_appended_at_once_are_the_bytes_of_one_append_each(tmp_path, records):
    for r in records:
        append_jsonl(tmp_path / "one.jsonl", r)
    append_jsonl_many(tmp_path / "many.jsonl", records)
    assert (tmp_path / "many.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()


TASK = """import json, sys
w = sys.stdout.write
for i in range(200_000):
    w('{"step": %d, "train_loss": %.6f}\\n' % (i, 1.0 / (i + 1)))
print(json.dumps({"val_loss": 0.5}))
"""


@pytest.mark.slow
def test_a_run_printing_200000_metric_lines_keeps_every_line_and_its_final(tmp_path):
    """Through the real CLI: every reported line becomes a metrics.jsonl line (in one write, not an fsync per
    line: 200,000 fsyncs were minutes), and the final names its line."""
    user_project(tmp_path, TASK, {"a": []})
    r = subprocess.run([sys.executable, "-m", "sweeper", "--config-dir", "conf", "+experiment=mine", "seeds=0",
                        "sweeper.dir=sw", "sweeper.report=false"], cwd=tmp_path, env=child_env(),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    run = tmp_path / "sw" / "runs" / "a" / "seed_0"
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 200_000 and json.loads(lines[-1]) == {"step": 199_999, "train_loss": 0.000005}
    summary = json.loads((run / "summary.json").read_text())
    assert summary["final"]["val_loss"] == 0.5
    assert summary["metric_sources"]["val_loss"].startswith("stdout line 200001 of the run's output")
