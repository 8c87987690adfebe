"""Write a sweep directory to disk in the shared layout, from chosen per-seed results (tests and benchmarks).

    from synthetic_sweep import write_sweep
    root = write_sweep(tmp_path / "s", {"rope": [3.1, 3.2, 3.0], "nope": [3.5, None, 3.6]}, baseline="rope")

A value gives a finished run whose final val_loss is that value (NaN allowed); None gives a diverged run.
`status` overrides per (variant, seed): "failed", "interrupted", "missing" (no run dir at all), ...
Every file is real JSON/JSONL as the trainer writes it; curves decay towards the final value.
"""
from __future__ import annotations

import json
import math
import zlib
from pathlib import Path

import numpy as np

FP = {"corpus_hash": "c0ffee", "torch_version": "2.13.0", "python_version": "3.11.9", "device": "cpu",
      "num_threads": 1, "deterministic": True}


def write_sweep(root, finals: dict, *, baseline: str | None = None, metric: str = "val_loss",
                lower_is_better: bool = True, seeds: list[int] | None = None, status: dict | None = None,
                fingerprint: dict | None = None, paired: bool = True, curve_points: int = 20,
                eval_every: int = 5, health: dict | None = None, name: str = "synthetic",
                write_manifest: bool = True) -> Path:
    """fingerprint: {(variant, seed): {key: value}} overrides; paired=False gives every run its own data order."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    status, fingerprint, health = status or {}, fingerprint or {}, health or {}
    variants = list(finals)
    n_seeds = max(len(v) for v in finals.values())
    seeds = list(range(n_seeds)) if seeds is None else seeds
    runs = []
    for variant in variants:
        for k, seed in enumerate(seeds):
            rel = f"runs/{variant}/seed_{seed}"
            runs.append({"run_id": f"{variant}-s{seed}", "variant": variant, "seed": seed, "run_dir": rel,
                         "config_hash": f"h-{variant}"})
            final = finals[variant][k] if k < len(finals[variant]) else math.nan
            st = status.get((variant, seed), "finished" if final is not None else "diverged")
            if st == "missing":
                continue
            _write_run(root / rel, variant, seed, final, st, metric, fingerprint.get((variant, seed), {}), paired,
                       curve_points, eval_every, health.get((variant, seed)))
    if write_manifest:
        manifest = {"experiment": {"name": name, "baseline": baseline or variants[0], "metric": metric,
                                   "lower_is_better": lower_is_better, "variants": variants},
                    "seeds": seeds, "runs": runs, "created": 0.0, "argv": ["synthetic"]}
        (root / "sweep.json").write_text(json.dumps(manifest, indent=1))
    return root


def _write_run(run_dir: Path, variant, seed, final, st, metric, fp_override, paired, points, eval_every, health):
    run_dir.mkdir(parents=True, exist_ok=True)
    fp = dict(FP, config_hash=f"h-{variant}", seed=seed,
              data_order_hash=f"order-{seed}" if paired else f"order-{variant}-{seed}",
              eval_batches_hash=f"eval-{seed}" if paired else f"eval-{variant}-{seed}")
    fp.update(fp_override)
    done = st == "finished"
    n_logged = points if done else max(1, points // 2)
    target = final if isinstance(final, (int, float)) and math.isfinite(final) else 3.0
    rng = np.random.default_rng(zlib.crc32(f"{variant}/{seed}".encode()))
    lines = []
    for i in range(1, n_logged + 1):
        step = i * 10
        rec = {"step": step, "train_loss": target + 2.0 * math.exp(-i / (points / 4)) + 0.01 * rng.standard_normal(),
               "grad_norm": 1.0 + math.exp(-i / 5) + 0.05 * rng.random(), "lr": 1e-3, "tokens_per_s": 5000.0}
        if i % eval_every == 0 or i == points:
            rec[metric] = target + 2.0 * math.exp(-i / (points / 4))
        lines.append(json.dumps(rec))
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (run_dir / "config.yaml").write_text(f"experiment: synthetic\nvariant: {variant}\nseed: {seed}\n")
    (run_dir / "status.json").write_text(json.dumps({
        "status": st, "run_id": f"{variant}-s{seed}", "variant": variant, "seed": seed,
        "error": None if st in ("finished", "running", "pending") else f"{st} at step {n_logged * 10}",
        "exit_code": 0 if done else 1, "started": 0.0, "ended": 1.0}))
    if st in ("finished", "failed", "diverged"):
        final_value = final if done else None
        (run_dir / "summary.json").write_text(json.dumps({
            "run_id": f"{variant}-s{seed}", "variant": variant, "seed": seed, "status": st, "steps": n_logged * 10,
            "wall_time_s": 12.5, "final": {metric: final_value, "train_loss": target}, "fingerprint": fp,
            "env": {"python": fp["python_version"]}}))
    verdict = health or "pass"
    (run_dir / "health.json").write_text(json.dumps({"verdict": verdict, "checks": [
        {"name": "loss_decreases", "status": "pass", "value": 1.0, "expected": "> 0", "message": "ok"},
        {"name": "qk_grad_nonzero", "status": "fail" if verdict == "fail" else "pass", "value": 0.0,
         "expected": "> 0", "message": "q/k weights get no gradient" if verdict == "fail" else "ok"}]}))
    (run_dir / "stdout.log").write_text("synthetic\n")
