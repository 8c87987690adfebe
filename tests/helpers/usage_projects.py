"""Tiny user projects for the checks on what runs used (tests/test_integrity_usage_cli.py): a simulated training
script in pure Python (numpy for the run API's generator), at two integration levels (a plain argparse script
through task.command printing JSON lines, and a script on the run API), healthy or with one bug, swept through
the real CLI.

    project = make_project(tmp_path, "api", CASES["unread_key"])   # conf/experiment/use.yaml + use.py
    proc = sweep(project, "seeds=0-2")

The script fits y = 2x by SGD, `batch` noisy points a step for `steps` steps, evaluates `points` fixed validation
points every 10 steps and reports what it consumed under the documented keys (examples_seen, optimizer_steps,
eval_size, train_size). A case is (what it replaces in the script, what it sets in the experiment, the variant's
overrides, the check that must name it or None for a healthy twin).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.commands import run_sweeper

PLAIN = '''\
import argparse, json, random
p = argparse.ArgumentParser()
for k, t in (("seed", int), ("lr", float), ("steps", int), ("batch", int), ("points", int), ("limit", int),
             ("dropout", float)):
    p.add_argument(f"--{k}", type=t, default=None)
cfg, _ = p.parse_known_args()
rng = random.Random(cfg.seed)
draw = rng.gauss
def log(step, **m):
    print(json.dumps({"step": step, **m}), flush=True)
def finish(**m):
    print(json.dumps(m), flush=True)
'''

RUN_API = '''\
import json, random
import sweeper
run = sweeper.init()
cfg = run.config
g = run.numpy_rng("data_order")
DRAW
log, finish = run.log, run.finish
'''
DRAWN = "draw = lambda a, b: float(g.normal(a, b))"
NOT_DRAWN = "draw = random.Random(run.seed).gauss        # the generator asked for above is never drawn from"

BODY = '''\
val = random.Random(7)
xs = [val.gauss(0, 1) for _ in range(POINTS)]
ys = [2.0 * x + val.gauss(0, 0.3) for x in xs]
pool = [(draw(0, 1), 0.0) for _ in range(LIMIT or 400)]
w = -2.0 + 0.1 * draw(0, 1)
for step in range(1, cfg.steps + 1):
    for _ in range(cfg.batch):
        x = pool[int(abs(draw(0, 1)) * 1000) % len(pool)][0] + 0.01 * draw(0, 1)
        w -= LR * (w * x - (2.0 * x + draw(0, 0.8))) * x / cfg.batch
    if step % 10 == 0:
        log(step, val_loss=sum((w * x - y) ** 2 for x, y in zip(xs, ys)) / len(xs))
finish(val_loss=sum((w * x - y) ** 2 for x, y in zip(xs, ys)) / len(xs) + 0.001 * DROPOUT,
       examples_seen=cfg.steps * cfg.batch, optimizer_steps=cfg.steps, eval_size=len(xs), train_size=len(pool))
'''
SCRIPT = {"POINTS": "cfg.points", "LIMIT": "cfg.limit", "LR": "cfg.lr", "DROPOUT": "cfg.dropout"}

EXPERIMENT = '''\
# @package _global_
defaults:
  - override /task: custom
task:
  command: [python, use.py]
{args}lr: 0.05
steps: 40
batch: 4
points: 64
limit: null
dropout: 0.0
{extra}experiment:
  name: use
  baseline: base
{bundles}  metric: val_loss
  lower_is_better: true
  variants:
    base: []
    big: {big}
'''


@dataclass(frozen=True)
class Case:
    big: str                                         # the variant's overrides, as YAML
    check: str | None                                # the check that must name it; None: a healthy twin, quiet
    script: dict = field(default_factory=dict)       # placeholder -> expression (SCRIPT's by default)
    extra: str = ""                                  # more lines of the experiment's config
    unused_generator: bool = False                   # the run-API script asks for data_order and never draws
    bundle: bool = False                             # big declared a bundle: its 2 concerns are meant


CASES = {
    # a variant that changes lr and dropout where the script reads lr only: half of its change never ran
    # (declared a bundle: lr and dropout are two concerns, and several_concerns is not the check these test)
    "unread_key": Case("[lr=0.2, dropout=0.5]", "key_never_read", {"DROPOUT": "0.0"}, bundle=True),
    "read_key": Case("[lr=0.2, dropout=0.5]", None, bundle=True),
    # a budget moved through examples per step (no steps/epochs key changes)
    "examples_per_step": Case("[batch=12]", "budget_confound"),
    "same_budget": Case("[lr=0.08]", None),
    # an evaluation whose size differs between arms, through a key no name rule knows
    "eval_size": Case("[points=24]", "evaluation_identity"),
    # a debug limit left on the training data of every arm
    "debug_limit": Case("[lr=0.08]", "train_subset"),        # the experiment sets limit: 40 (make_project)
    "generator_unused": Case("[lr=0.08]", "generator_unused", unused_generator=True),
}


def make_project(root: Path, level: str, case: Case, name: str = "") -> Path:
    """A project folder: use.py at `level` ("plain" or "api") and conf/experiment/use.yaml for `case`."""
    body = BODY
    for key, value in {**SCRIPT, **case.script}.items():
        body = body.replace(key, value)
    head = PLAIN if level == "plain" else RUN_API.replace("DRAW", NOT_DRAWN if case.unused_generator else DRAWN)
    root.mkdir(parents=True, exist_ok=True)
    (root / "use.py").write_text(head + body)
    text = EXPERIMENT.format(args="  args: flags\n" if level == "plain" else "", extra=case.extra, big=case.big,
                              bundles="  bundles: [big]\n" if case.bundle else "")
    if name == "debug_limit":
        text = text.replace("limit: null", "limit: 40")
    (root / "conf" / "experiment").mkdir(parents=True, exist_ok=True)
    (root / "conf" / "experiment" / "use.yaml").write_text(text)
    return root


def sweep(project: Path, *args: str, timeout: float = 600):
    """`python -m sweeper --config-dir conf +experiment=use ...` in the project, one thread per run."""
    return run_sweeper("--config-dir", "conf", "+experiment=use", "launcher.threads_per_run=1",
                       f"sweeper.dir={project / 'sweeps' / 'use'}", "sweeper.journal=off", *args,
                       cwd=project, timeout=timeout, env={"SWEEPER_PROGRESS": "plain"})
