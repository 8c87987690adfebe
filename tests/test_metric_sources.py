"""Where a zero-glue run's final metrics come from: Lightning's CSVLogger metrics.csv in a subfolder of {out_dir}
(empty cells), which file wins when several carry a key, the stdout line; recorded in the summary, shown in
report.md per run, and the decision metric on each run's "done" line.

    python -m pytest -q -n 0 -p no:cacheprovider tests/test_metric_sources.py
"""
from __future__ import annotations

import json
import os
import time

import pytest

from sweeper.run.observed.reported import read_reported
from tests.helpers.commands import run_sweeper

# What PyTorch Lightning's CSVLogger writes: one header of every key, a row per log call, empty cells for the keys
# not logged at that row (validation rows carry val_loss, training rows train_loss).
LIGHTNING_CSV = ("epoch,step,train_loss,val_loss\n0,9,1.2,\n0,9,,0.95\n1,19,0.8,\n1,19,,0.71\n2,29,0.6,\n")


def lightning_layout(out):
    folder = out / "lightning_logs" / "version_0"
    folder.mkdir(parents=True)
    (folder / "metrics.csv").write_text(LIGHTNING_CSV)
    (folder / "hparams.yaml").write_text("lr: 0.1\n")
    return folder / "metrics.csv"


def test_lightning_csv_in_a_subfolder_empty_cells_and_the_last_evaluation(tmp_path):
    out = tmp_path / "out"
    lightning_layout(out)
    got = read_reported('starting\n{"val_loss": 9.0}\n', ["stdout"], None, base=out, out_dir=out)
    assert got.final["val_loss"] == 0.71 and got.final["train_loss"] == 0.6    # the last non-empty cell
    assert got.sources["val_loss"] == ("out/lightning_logs/version_0/metrics.csv, column val_loss, row 4 after the "
                                       "header (step 19): the last of 3 values")   # 2 cells, 1 stdout line
    assert got.sources["train_loss"].endswith("row 5 after the header (step 29): the last of 3 values")


def test_the_file_written_last_wins_over_older_files_and_stdout(tmp_path):
    out = tmp_path / "out"
    older = lightning_layout(out)
    newer = out / "eval" / "eval_results.json"
    newer.parent.mkdir()
    newer.write_text(json.dumps({"val": {"loss": 0.5}, "val_loss": 0.42}))
    past = time.time() - 60
    os.utime(older, (past, past))                       # metrics.csv written first, eval_results.json last
    got = read_reported('{"val_loss": 9.0}\n', ["stdout"], None, base=out, out_dir=out)
    assert got.final["val_loss"] == 0.42 and got.final["val.loss"] == 0.5
    assert got.sources["val_loss"] == "out/eval/eval_results.json, key val_loss: the last of 4 values"
    os.utime(newer, (past - 60, past - 60))             # now eval_results.json is the older one: metrics.csv wins
    got = read_reported("", ["stdout"], None, base=out, out_dir=out)
    assert got.final["val_loss"] == 0.71 and "metrics.csv, column val_loss" in got.sources["val_loss"]


def test_a_stdout_metric_names_its_line(tmp_path):
    got = read_reported('epoch 1\n{"loss": 2.0}\nepoch 2\nMETRICS {"loss": 1.5, "step": 2}\n', ["stdout"],
                        "METRICS ", base=tmp_path, out_dir=None)
    assert got.final == {"loss": 1.5}
    assert got.sources["loss"] == ('stdout line 4 of the run\'s output `METRICS {"loss": 1.5, "step": 2}`, key loss '
                                   '(step 2): the only value')


LIGHTNING_LIKE = """\
import argparse, csv, os
p = argparse.ArgumentParser()
p.add_argument("--seed", type=int); p.add_argument("--lr", type=float); p.add_argument("--out")
a = p.parse_args()
folder = os.path.join(a.out, "lightning_logs", "version_0")
os.makedirs(folder)
with open(os.path.join(folder, "metrics.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["epoch", "step", "train_loss", "val_loss"])
    for epoch in range(3):
        w.writerow([epoch, 10 * epoch + 9, 1.0 / (epoch + 1), ""])
        w.writerow([epoch, 10 * epoch + 9, "", a.lr + 0.01 * a.seed + 0.1 / (epoch + 1)])
print("training done")
"""
EXPERIMENT = """\
# @package _global_
defaults:
  - override /task: custom
task:
  command: [python, fit.py, --out, "{out_dir}"]
  args: [seed, lr]
lr: 0.5
experiment:
  name: lit
  baseline: a
  metric: val_loss
  lower_is_better: true
  variants: {a: [], b: [lr=0.1]}
"""


@pytest.mark.slow
def test_report_and_done_line_name_the_final_s_file_column_and_row(tmp_path):
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "lit.yaml").write_text(EXPERIMENT)
    (tmp_path / "fit.py").write_text(LIGHTNING_LIKE)
    proc = run_sweeper("--config-dir", "conf", "+experiment=lit", "seeds=0-1", "launcher.threads_per_run=1",
                       "sweeper.dir=sw", cwd=tmp_path, env={"SWEEPER_PROGRESS": "plain"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    done = [ln for ln in proc.stdout.splitlines() if "] done " in ln]
    assert len(done) == 4 and all(" val_loss=" in ln for ln in done), proc.stdout
    b1 = [ln for ln in done if "b/seed_1" in ln]
    assert b1 and b1[0].split(" in ")[1].split()[1] == "val_loss=0.1433", b1     # the decision metric first
    summary = json.loads((tmp_path / "sw" / "runs" / "b" / "seed_1" / "summary.json").read_text())
    where = "out/lightning_logs/version_0/metrics.csv, column val_loss, row 6 after the header (step 29)"
    assert summary["metric_sources"]["val_loss"] == f"{where}: the last of 3 values"
    report = (tmp_path / "sw" / "report.md").read_text()
    section = report.split("## Where each final came from")[1].split("\n## ")[0]
    assert f"| b/seed_1 | 0.1433 | {where}: the last of 3 values |" in section, section
