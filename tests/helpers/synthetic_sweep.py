"""Write a sweep directory to disk in the run contract's layout, from chosen per-seed results (tests, benchmarks).

    from tests.helpers.synthetic_sweep import write_sweep
    root = write_sweep(tmp_path / "s", {"rope": [3.1, 3.2, 3.0], "nope": [3.5, None, 3.6]}, baseline="rope")

A value gives a finished run whose final val_loss is that value (NaN allowed); None gives a diverged run.
`extra_finals` {metric: {variant: [value per seed]}} adds further final metrics (e.g. tokens_per_s) to each
finished run's summary; `min_effect` and `secondary_metrics` go into the manifest's experiment.
`status` overrides per (variant, seed): "failed", "interrupted", "running", "pending", "missing" (no run dir at
all); `errors` / `logs` set a run's recorded error and its log text. Every file is written through
sweeper.run.files.rundir (RunDir, write_manifest) and sweeper.health.result, as a real run writes it; curves decay
towards the final value. Tests that simulate damage overwrite the files with raw bytes afterwards.
"""
from __future__ import annotations

import math
import zlib
from pathlib import Path

import numpy as np

from sweeper.health.result import CheckResult, HealthReport
from sweeper.run.files.atomic import rewrite_jsonl
from sweeper.run.files.experiment import Experiment
from sweeper.run.files.manifest import Manifest, RunEntry, write_manifest
from sweeper.run.files.records import StatusRecord, Summary
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import Status

FP = {"corpus_hash": "c0ffee", "torch_version": "2.13.0", "python_version": "3.11.9", "device": "cpu",
      "num_threads": 1, "deterministic": True}


def run_rel(variant: str, seed: int) -> str:
    """The run dir of a run, relative to the sweep dir ('/' in a variant name would nest folders)."""
    return f"runs/{variant.replace('/', '_')}/seed_{seed}"


def write_sweep(root, finals: dict, *, baseline: str | None = None, metric: str = "val_loss",
                lower_is_better: bool = True, seeds: list[int] | None = None, status: dict | None = None,
                fingerprint: dict | None = None, paired: bool = True, curve_points: int = 20,
                eval_every: int = 5, health: dict | None = None, name: str = "synthetic",
                write_manifest_file: bool = True, errors: dict | None = None, logs: dict | None = None,
                extra_finals: dict | None = None, min_effect: float | None = None,
                secondary_metrics: dict | None = None) -> Path:
    """fingerprint: {(variant, seed): {key: value}} overrides; paired=False gives every run its own data order.
    baseline: None = the first variant; "" = none recorded (as a Hydra multirun may leave it)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    status, fingerprint, health = status or {}, fingerprint or {}, health or {}
    errors, logs = errors or {}, logs or {}
    variants = list(finals)
    n_seeds = max(len(v) for v in finals.values())
    seeds = list(range(n_seeds)) if seeds is None else seeds
    entries = []
    for variant in variants:
        for k, seed in enumerate(seeds):
            rel = run_rel(variant, seed)
            entries.append(RunEntry(run_id=f"{variant}-s{seed}", variant=variant, seed=seed, run_dir=rel,
                                    config_hash=f"h-{variant}"))
            final = finals[variant][k] if k < len(finals[variant]) else math.nan
            st = status.get((variant, seed), "finished" if final is not None else "diverged")
            if st == "missing":
                continue
            extra = {m: per[variant][k] for m, per in (extra_finals or {}).items() if k < len(per.get(variant, []))}
            _write_run(RunDir(root / rel), variant, seed, Status(st), final, metric,
                       fingerprint.get((variant, seed), {}), paired, curve_points, eval_every,
                       health.get((variant, seed)), errors.get((variant, seed)), logs.get((variant, seed)), extra)
    if write_manifest_file:
        experiment = Experiment(name=name, baseline=variants[0] if baseline is None else baseline, metric=metric,
                                lower_is_better=lower_is_better, variants={v: [] for v in variants},
                                min_effect=min_effect, secondary_metrics=dict(secondary_metrics or {}))
        write_manifest(root, Manifest(experiment=experiment, runs=entries, seeds=seeds, created=0.0,
                                      argv=["synthetic"]))
    return root


def _write_run(rd: RunDir, variant, seed, st: Status, final, metric, fp_override, paired, points, eval_every,
               health, error, log, extra=None):
    fp = dict(FP, config_hash=f"h-{variant}", seed=seed,
              data_order_hash=f"order-{seed}" if paired else f"order-{variant}-{seed}",
              eval_batches_hash=f"eval-{seed}" if paired else f"eval-{variant}-{seed}")
    fp.update(fp_override)
    done = st is Status.FINISHED
    n_logged = points if done else max(1, points // 2)
    target = final if isinstance(final, (int, float)) and math.isfinite(final) else 3.0
    rng = np.random.default_rng(zlib.crc32(f"{variant}/{seed}".encode()))
    lines = []
    for i in range(1, n_logged + 1):
        rec = {"step": i * 10, "train_loss": target + 2.0 * math.exp(-i / (points / 4)) + 0.01 * rng.standard_normal(),
               "grad_norm": 1.0 + math.exp(-i / 5) + 0.05 * rng.random(), "lr": 1e-3, "tokens_per_s": 5000.0}
        if i % eval_every == 0 or i == points:          # the last evaluation is the final (a healthy run's)
            rec[metric] = target if done and i == points else target + 2.0 * math.exp(-i / (points / 4))
        lines.append(rec)
    rd.path.mkdir(parents=True, exist_ok=True)
    rewrite_jsonl(rd.metrics_path, lines)         # one file write (a run appends them one by one)
    rd.write_config({"experiment": "synthetic", "variant": variant, "seed": seed})
    if error is None and st not in (Status.FINISHED, Status.RUNNING, Status.PENDING):
        error = f"{st.value} at step {n_logged * 10}"
    rd.write_status(StatusRecord(status=st, run_id=f"{variant}-s{seed}", experiment="synthetic", variant=variant,
                                 seed=seed, error=error, exit_code=0 if done else 1, started=0.0, ended=1.0))
    if st in (Status.FINISHED, Status.FAILED, Status.DIVERGED):
        rd.write_summary(Summary(status=st, final={metric: final if done else None, "train_loss": target,
                                                   **(extra if done and extra else {})},
                                 steps=n_logged * 10, wall_time_s=12.5, run_id=f"{variant}-s{seed}",
                                 variant=variant, seed=seed, fingerprint=fp, env={"python": fp["python_version"]}))
    verdict = health or "pass"
    HealthReport([CheckResult("loss_decreases", "pass", 1.0, "> 0", "ok"),
                  CheckResult("qk_grad_nonzero", "fail" if verdict == "fail" else "pass", 0.0, "> 0",
                              "q/k weights get no gradient" if verdict == "fail" else "ok")]).write(rd.health_path)
    rd.log_path.write_text(log if log is not None else "synthetic\n")
