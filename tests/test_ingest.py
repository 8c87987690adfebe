"""A run's reported metric lines are ingested at C speed, the same records as line by line (issue 48, scale;
figures: benchmarks/bench_ingest.py).

    python -m pytest -q -n 0 tests/test_ingest.py
"""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from sweeper.run.files.atomic import append_jsonl, append_jsonl_many
from sweeper.run.observed import stdout_metrics
from sweeper.run.observed.log_tail import LogTail
from sweeper.run.observed.reported import read_reported
from sweeper.run.observed.stdout_metrics import StdoutMetrics, iter_json_objects, text_objects
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


def _line_by_line(text: str) -> tuple[dict, list[dict], dict]:
    """The stdout source's rule, one line at a time: (finals, step records, key -> line number of its last value)."""
    final, steps, line_of = {}, [], {}
    for number, _, obj in iter_json_objects(text.splitlines()):
        final.update(obj)
        line_of.update(dict.fromkeys(obj, number))
        if len(obj) > 1 and type(obj.get("step")) is int and obj["step"] >= 0:
            steps.append(obj)
    final.pop("step", None)
    return final, steps, line_of


MIXED = "".join(("epoch %d done\n" % i if i % 97 == 0 else "")
                + ('{"step": %d, "loss": %d}\n' % (i, i) if i % 5 else '{"val_loss": %d}\n' % i)
                + ('{"step": %d, "d": {"a": %d}}\n' % (i, i) if i % 211 == 0 else "") for i in range(1500))


@pytest.mark.parametrize("chunk", [37, 4096, 2 ** 22])
@pytest.mark.parametrize("text", [TRICKY, MIXED, MIXED.replace("epoch", '{"x": 1}\rep'), TRICKY + MIXED + TRICKY],
                         ids=["tricky", "mixed", "carriage-returns", "all"])
def test_chunks_fed_as_they_come_give_what_the_lines_give_one_by_one(monkeypatch, chunk, text):
    """The stdout lines fed at any cut between lines, parsed a chunk at a time (fast path or not), give the
    finals, the curves (also as the metrics lines written) and the line each final names, line by line's."""
    monkeypatch.setattr(stdout_metrics, "CHUNK", chunk)
    data = text.encode()
    parsed = StdoutMetrics()
    for cut in range(0, len(data), 5000):                   # fed as a tail reads it: whole lines each time
        end = data.rfind(b"\n", 0, cut + 5000) + 1 or len(data)
        parsed.feed(data[data.rfind(b"\n", 0, cut) + 1 if cut else 0:end])
    got = read_reported(parsed, ["stdout"], None, base=None)
    final, steps, line_of = _line_by_line(text)
    assert json.dumps(got.final) == json.dumps(final) and json.dumps(got.steps) == json.dumps(steps)
    written = [json.loads(line) for line in got.metrics_lines().splitlines()]
    assert json.dumps(written, sort_keys=True) == json.dumps(steps, sort_keys=True)
    for key, number in line_of.items():
        if key != "step":
            assert got.sources[key].startswith(f"stdout line {number} of the run's output"), key


def test_a_tail_feeds_the_lines_as_they_are_written_and_refuses_a_log_changed_under_it(tmp_path):
    """A real thread on a real file: whole lines only, then the rest; a log rewritten under it: parse again."""
    log = tmp_path / "stdout.log"
    log.write_bytes(b"before the mark\n")
    fed = []
    tail = LogTail(str(log), log.stat().st_size, fed.append).start()
    with open(log, "ab", buffering=0) as f:
        f.write(b'{"step": 1, "a": 1}\n{"step": 2, ')
        deadline = time.monotonic() + 10
        while not fed and time.monotonic() < deadline:
            time.sleep(0.01)
        f.write(b'"a": 2}\n{"step": 3')
    data = log.read_bytes()[len(b"before the mark\n"):]
    rest = tail.stop(data)
    assert fed == [b'{"step": 1, "a": 1}\n'] and rest == data[len(fed[0]):]
    assert b"".join(fed) + rest == data
    other = LogTail(str(log), 0, [].append).start()
    deadline = time.monotonic() + 10
    while not other.read and time.monotonic() < deadline:      # until it has read (a loaded machine is slow)
        time.sleep(0.01)
    other.stop()
    assert other.read > 0 and other.stop(b"X" + log.read_bytes()[1:]) is None     # not what it read: None


# every 1,000th line a progress line, one nested record, the decision metric last
TASK = """import json, sys
w = sys.stdout.write
for i in range(200_000):
    if i % 1000 == 999:
        w('epoch %d done\\n' % (i // 1000))
    w('{"step": %d, "train_loss": %.6f}\\n' % (i, 1.0 / (i + 1)))
    if i == 123_456:
        w('{"step": %d, "grad": {"norm": 1.5}}\\n' % i)
print(json.dumps({"val_loss": 0.5}))
"""


@pytest.mark.slow
def test_a_run_printing_200000_metric_lines_keeps_every_line_and_its_final(tmp_path):
    """Through the real CLI: the run's metrics.jsonl holds every reported step line, the same content in the same
    order as the script printed them; the text lines stay in stdout.log; the final names its line."""
    user_project(tmp_path, TASK, {"a": []})
    r = subprocess.run([sys.executable, "-m", "sweeper", "--config-dir", "conf", "+experiment=mine", "seeds=0",
                        "sweeper.dir=sw", "sweeper.report=false"], cwd=tmp_path, env=child_env(),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    run = tmp_path / "sw" / "runs" / "a" / "seed_0"
    alone = subprocess.run([sys.executable, "task.py"], cwd=tmp_path, capture_output=True, check=True).stdout
    printed = [json.loads(line) for line in alone.splitlines() if line.startswith(b'{"step"')]
    printed[123_457] = {"step": 123_456, "grad.norm": 1.5}                      # nested keys, flattened
    written = [json.loads(line) for line in (run / "metrics.jsonl").read_bytes().splitlines()]
    assert len(written) == 200_001 and written == printed
    log = (run / "stdout.log").read_bytes()
    assert log.count(b"epoch ") == 200 and b"epoch 199 done\n" in log
    summary = json.loads((run / "summary.json").read_text())
    assert summary["final"]["val_loss"] == 0.5 and summary["final"]["train_loss"] == 0.000005
    assert summary["metric_sources"]["val_loss"].startswith("stdout line 200202 of the run's output")
