"""Tiny user projects for the checks across runs (tests/test_integrity_cli.py): one simulated training script in
pure Python, at the two integration levels (a plain argparse script through task.command, and a script on the run
API), healthy or with one bug of a class, swept through the real CLI.

    project = make_project(tmp_path, "plain", bug="seeds")      # conf/experiment/fit.yaml + fit.py
    proc = sweep(project, "seeds=0-2")                           # python -m sweeper, as a user runs it

The script fits y = 2x by SGD on a stream of noisy points drawn from its seed, evaluates a fixed validation set
every 10 steps (curves) and reports the final validation loss (the last evaluation). Each bug replaces a line or a
setting of the healthy project; BUGS says which class it is and which check must name it.
"""
from __future__ import annotations

from pathlib import Path

from tests.helpers.commands import run_sweeper

PLAIN = '''\
import argparse, json, math, random
p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, default=0)
p.add_argument("--lr", type=float, default=0.05)
p.add_argument("--steps", type=int, default=60)
p.add_argument("--hidden_dim", type=int, default=8)
p.add_argument("--patience", type=int, default=0)
a, _ = p.parse_known_args()
cfg = a
def report(step, **m):
    print(json.dumps({"step": step, **m}) if step is not None else json.dumps(m), flush=True)
'''

RUN_API = '''\
import json, math, random
import sweeper
run = sweeper.init()
cfg = run.config
def report(step, **m):
    run.log(step, **m) if step is not None else run.finish(**m)
'''

BODY = '''\
rng = random.Random(SEED)
val = random.Random(7)
xs = [val.gauss(0, 1) for _ in range(64)]
ys = [2.0 * x + val.gauss(0, 0.3) for x in xs]
def val_loss(w):
    return sum((w * x - y) * (w * x - y) for x, y in zip(xs, ys)) / len(xs) if abs(w) < 1e6 else float("nan")
w, scale, history = rng.gauss(-2, 0.5), 1 + 0.02 * HIDDEN, []
for step in range(1, cfg.steps + 1):
    x = rng.gauss(0, 1)
    y = 2.0 * x + rng.gauss(0, 0.8)
    w -= cfg.lr * scale * (w * x - y) * x
    if step % 10 == 0:
        history.append(val_loss(w))
        report(step, METRIC=history[-1])
        if cfg.patience and len(history) > cfg.patience and min(history[-cfg.patience:]) > min(history[:-cfg.patience]):
            break
report(None, METRIC=FINAL)
'''

HEALTHY = {"SEED": "SEED_OF_RUN", "HIDDEN": "cfg.hidden_dim", "FINAL": "history[-1]", "METRIC": "val_loss"}
SEED_OF = {"plain": "a.seed", "api": "run.seed_for('data')"}

EXPERIMENT = '''\
# @package _global_
defaults:
  - override /task: custom
task:
  command: {command}
{args}lr: 0.05
steps: 60
hidden_dim: 8
patience: 0
experiment:
  name: fit
  baseline: base
  metric: {metric}
  lower_is_better: {lower}
{extra}  variants:
    base: {base}
    big: {big}
'''

# bug -> (class, the check that must name it, what it changes in the healthy project)
BUGS = {
    "seeds": (1, "seeds_no_effect", {"SEED": "1234"}),
    "change": (2, "change_no_effect", {"HIDDEN": "8"}),
    "direction": (3, "metric_direction", {"METRIC": "objective", "lower": "false", "metric": "objective"}),
    "budget": (5, "budget_confound", {"big": "[steps=120]"}),
    "early_stop": (5, "budget_confound", {"big": "[patience=1]", "lr": "0.3"}),
    "selection": (6, "selected_final", {"FINAL": "min(history)", "lr": "0.3"}),   # converged early: noise
    "saturated": (8, "no_spread", {"METRIC": "val_acc", "FINAL": "1.0", "metric": "val_acc", "lower": "false"}),
    "baseline": (9, "broken_baseline", {"lr": "3.0", "big": "[lr=0.05]"}),
}


def make_project(root: Path, level: str, bug: str | None = None) -> Path:
    """A project folder: fit.py at `level` ("plain" or "api") and conf/experiment/fit.yaml, healthy or with `bug`."""
    change = BUGS[bug][2] if bug else {}
    sub = {**HEALTHY, **{k: v for k, v in change.items() if k.isupper()}}
    body = BODY
    if bug == "change" and level == "plain":          # the flag the script never reads: --hidden-dim, not _dim
        sub["HIDDEN"] = "cfg.hidden_dim"
    for key in ("SEED", "HIDDEN", "FINAL"):
        body = body.replace(key, sub[key])
    body = body.replace("SEED_OF_RUN", SEED_OF[level]).replace("METRIC=", f"{sub['METRIC']}=")
    if bug == "saturated":                              # accuracy of a classifier that is always right: 1.0
        body = body.replace("report(step, val_acc=history[-1])", "report(step, val_loss=history[-1], val_acc=1.0)")
    if bug == "change" and level == "api":              # a config key no line of the script reads
        body = body.replace("cfg.hidden_dim", "8")
    script = (PLAIN if level == "plain" else RUN_API) + body
    root.mkdir(parents=True, exist_ok=True)
    (root / "fit.py").write_text(script)
    key = "hidden-dim" if bug == "change" and level == "plain" else "hidden_dim"
    command = "[python, fit.py]"
    args = "  args: flags\n" if level == "plain" else ""
    big = change.get("big", f"[{key}=32]")
    text = EXPERIMENT.format(command=command, args=args, metric=change.get("metric", "val_loss"),
                             lower=change.get("lower", "true"), base=change.get("base", "[]"), big=big, extra="")
    text = text.replace("hidden_dim: 8", f"{key}: 8").replace("lr: 0.05", f"lr: {change.get('lr', '0.05')}")
    (root / "conf" / "experiment").mkdir(parents=True, exist_ok=True)
    (root / "conf" / "experiment" / "fit.yaml").write_text(text)
    return root


def sweep(project: Path, *args: str, timeout: float = 600):
    """`python -m sweeper --config-dir conf +experiment=fit ...` in the project, one thread per run."""
    return run_sweeper("--config-dir", "conf", "+experiment=fit", "launcher.threads_per_run=1",
                       f"sweeper.dir={project / 'sweeps' / 'fit'}", "sweeper.journal=off", *args,
                       cwd=project, timeout=timeout, env={"SWEEPER_PROGRESS": "plain"})

