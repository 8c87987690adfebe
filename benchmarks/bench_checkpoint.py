"""Checkpoint cost as a share of training time at the default checkpoint interval (target: under 3%).

    OMP_NUM_THREADS=1 python benchmarks/bench_checkpoint.py              # default config, 3 rounds
    python benchmarks/bench_checkpoint.py --rounds 5 train.batch_size=64  # any run-config override
    python benchmarks/bench_checkpoint.py --out benchmarks/results        # also write bench_checkpoint.{json,md}

Builds the real Trainer from the default run config (conf/ defaults: model small, train default), then
alternates, side by side in one process: `train.ckpt_interval` real training steps (batch, forward, backward,
clip, AdamW, schedule), timed; one real checkpoint (what the loop calls: `run.save_checkpoint` of the trainer's
state, which adds the RNG states and fingerprint, then serialises, hashes, writes, fsyncs, renames, prunes), timed.
Share = checkpoint time / (training time + checkpoint time) over
all rounds. Also reports the checkpoint size, the time to read one back (load + checksum) and the smallest
interval that keeps the share under 3% on this machine.
"""
from __future__ import annotations

import argparse
import math
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def default_run_config(overrides: list[str]) -> dict:
    """The run config a sweep would give its baseline (conf/ defaults), plus key=value overrides."""
    import yaml

    conf = Path(__file__).resolve().parent.parent / "conf"
    cfg = {s: yaml.safe_load((conf / s / f"{name}.yaml").read_text())
           for s, name in (("model", "small"), ("data", "stdlib"), ("train", "default"), ("health", "default"))}
    for o in overrides:
        key, _, value = o.partition("=")
        section, leaf = key.split(".", 1)
        cfg[section][leaf] = yaml.safe_load(value)
    return {"seed": 0, **cfg}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", help="folder for bench_checkpoint.json and bench_checkpoint.md")
    ap.add_argument("overrides", nargs="*", help="run-config overrides, e.g. train.batch_size=64")
    args = ap.parse_args()

    import torch

    from sweeper.run import init
    from sweeper.run.checkpoint import read_checkpoint
    from sweeper.train.config import RunConfig
    from sweeper.train.loop import Trainer

    raw = default_run_config(args.overrides)
    cfg = RunConfig.from_dict(raw)
    interval = cfg.train.ckpt_interval
    with tempfile.TemporaryDirectory() as tmp:
        run = init(tmp, config=raw, keep_checkpoints=cfg.train.keep_checkpoints, record_crashes=False)
        tr = Trainer(cfg, run.streams)

        def save(at: int) -> Path:
            return run.save_checkpoint({**tr.state_dict(), "loop": {"recent": [], "val_loss": 0.0}}, at,
                                       fingerprint=tr.fingerprint)

        def step() -> None:
            x, y = tr.batch()
            _, loss = tr.model(x, y)
            tr.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(tr.model.parameters(), cfg.train.grad_clip)
            tr.optimizer.step()
            tr.scheduler.step()
            loss.item()
            if tr.device.type == "cuda":
                torch.cuda.synchronize()

        for _ in range(3):                                   # warm-up (allocator, first-call overheads)
            step()
        save(0)
        train_s, save_s, n = [], [], 3
        for r in range(args.rounds):
            t0 = time.perf_counter()
            for _ in range(interval):
                step()
            train_s.append(time.perf_counter() - t0)
            n += interval
            t0 = time.perf_counter()
            path = save(n)
            save_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        read_checkpoint(path)
        load_s = time.perf_counter() - t0
        size_mb = path.stat().st_size / 2**20
        run.close()

    share = sum(save_s) / (sum(train_s) + sum(save_s))
    step_s, save_med = statistics.median(train_s) / interval, statistics.median(save_s)
    n_params = sum(p.numel() for p in tr.model.parameters())
    result = {"device": str(tr.device), "machine": platform.machine(), "torch": torch.__version__,
              "threads": torch.get_num_threads(), "params": n_params, "model": cfg.model.__dict__,
              "batch_size": cfg.train.batch_size, "ckpt_interval": interval, "rounds": args.rounds,
              "step_ms": step_s * 1e3, "save_ms": save_med * 1e3, "read_ms": load_s * 1e3,
              "checkpoint_mib": size_mb, "share": share,
              "min_interval_for_3pct": math.ceil(save_med * 0.97 / (0.03 * step_s))}
    lines = [
        f"device {tr.device}, torch threads {result['threads']}, model {n_params / 1e6:.2f}M params "
        f"(d_model {cfg.model.d_model}, {cfg.model.n_layers} layers), batch {cfg.train.batch_size}x"
        f"{cfg.model.context}, checkpoint every {interval} steps, {args.rounds} rounds",
        f"training: {step_s * 1e3:.1f} ms/step (median round), {statistics.median(train_s):.2f} s per interval",
        f"checkpoint: {size_mb:.2f} MiB, save {save_med * 1e3:.1f} ms (median), read back + verify "
        f"{load_s * 1e3:.1f} ms",
        f"checkpoint share of training time: {share * 100:.2f}% (target < 3%) -> "
        f"{'OK' if share < 0.03 else 'OVER TARGET'}; under 3% from an interval of "
        f"{result['min_interval_for_3pct']} steps",
    ]
    print("\n".join(lines))
    if args.out:
        from benchmarks._results import write_results

        write_results(args.out, "bench_checkpoint", result,
                      ["# Checkpoint cost (benchmarks/bench_checkpoint.py)", "", *(f"- {line}" for line in lines)])


if __name__ == "__main__":
    main()
