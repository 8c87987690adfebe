"""Cost of the health checks: live-monitor overhead on the training step (target <= 2% at the default interval) and
preflight wall time for the default model (target a few seconds on CPU).

    OMP_NUM_THREADS=1 python benchmarks/bench_health.py                  # default config
    python benchmarks/bench_health.py --rounds 8 health.interval=1        # any run-config override
    python benchmarks/bench_health.py --out benchmarks/results           # also write bench_health.{json,md}
    OMP_NUM_THREADS=1 python benchmarks/bench_health.py --zoo --out benchmarks/results   # bench_health_zoo.*

Monitor overhead, side by side in one process on the real Trainer (conf/ defaults): rounds of
`health.interval` x `--steps-per-round` training steps (the loop's step: batch, forward, backward, clip,
AdamW, schedule), alternately with the live monitor and without, in ABBA order so drift cancels. Two wirings, each
with every live check on (the optimizer and total steps given, as run.health gets them from the trainer):
  trainer  what train/loop.py calls: after_backward(step, loss.item(), pre-clip grad norm), after_step;
  user     what the README shows a user: after_backward(step, loss) with the loss TENSOR and no grad norm, so the
           monitor computes every step's gradient norm itself and watches the loss graph, then after_step.
Reported per wiring: ms/step each way, overhead = on/off - 1 (ratio of totals, and the median of the per-round
ratios, which a busy machine disturbs less), and the time spent inside the monitor calls as a share of the monitored
step time (the part of the difference that is not noise; the figure held to the 2% target). Preflight:
`train.preflight.preflight_config` on the default run config, median of `--preflight-reps`, and the same with the
training checks skipped, so the overfit session's share shows.
--zoo instead times preflight() on every small model of both bug zoos (tests/health_zoo*.py, broken and healthy,
one CPU thread; best of --preflight-reps per model): the per-model budget is about 1 s.
--data-zoo times preflight() on every model of the data/evaluation zoo (tests/helpers/health_data_zoo.py, broken and
healthy, seed 0, with their loader / val_data / evaluate), one thread, best of --preflight-reps: all checks, and
the same with the data and evaluation checks skipped, so their own cost shows. Target: median <= 0.5 s per model.

    OMP_NUM_THREADS=1 python benchmarks/bench_health.py --data-zoo --out benchmarks/results   # bench_health_data_zoo.*
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.bench_checkpoint import default_run_config  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=12, help="ABBA rounds (each: one block on, one block off)")
    ap.add_argument("--steps-per-round", type=int, default=1, help="monitor intervals per block")
    ap.add_argument("--preflight-reps", type=int, default=3)
    ap.add_argument("--out", help="folder for bench_health.json and bench_health.md")
    ap.add_argument("--zoo", action="store_true", help="time preflight on every zoo model instead")
    ap.add_argument("--data-zoo", action="store_true", help="time preflight on every data-zoo model instead")
    ap.add_argument("overrides", nargs="*", help="run-config overrides, e.g. health.interval=5")
    args = ap.parse_args()
    if args.zoo:
        return zoo(args)
    if args.data_zoo:
        return data_zoo(args)

    import torch

    from sweeper.health import LiveMonitor
    from sweeper.health.runner import _TRAINING
    from sweeper.train.config import RunConfig
    from sweeper.train.loop import Trainer
    from sweeper.train.preflight import preflight_config, preflight_model

    warnings.filterwarnings("ignore", message=".*DELIBERATE FAULT INJECTION.*")
    raw = _run_config(args.overrides)
    cfg = RunConfig.from_dict(raw)
    interval = cfg.health.interval
    block = interval * args.steps_per_round
    tr = Trainer(cfg)
    wirings = {}
    for wiring in ("trainer", "user"):
        monitor = LiveMonitor(tr.model, interval=interval, num_classes=tr.corpus.vocab_size, optimizer=tr.optimizer,
                              total_steps=cfg.train.steps)
        wirings[wiring] = _overhead(tr, cfg, monitor, wiring, block, args.rounds)
        warnings_seen = [c.name for c in monitor.report().checks if c.status in ("warn", "fail", "error")]
        wirings[wiring]["monitor_verdict"] = ",".join(warnings_seen) or "pass"

    pre_full, pre_light = [], []
    for _ in range(args.preflight_reps):
        t0 = time.perf_counter()
        report = preflight_config(raw)
        pre_full.append(time.perf_counter() - t0)
    for _ in range(args.preflight_reps):
        t0 = time.perf_counter()
        preflight_model(cfg, tr.model, tr.corpus, skip=_TRAINING)
        pre_light.append(time.perf_counter() - t0)

    n_params = sum(p.numel() for p in tr.model.parameters())
    result = {"device": str(tr.device), "threads": torch.get_num_threads(), "params": n_params,
              "interval": interval, "rounds": args.rounds, "block_steps": block, "load_average": os.getloadavg()[0],
              **{f"{w}_{k}": v for w, fig in wirings.items() for k, v in fig.items()},
              "monitor_share": max(fig["monitor_share"] for fig in wirings.values()),
              "preflight_s": statistics.median(pre_full),
              "preflight_no_training_checks_s": statistics.median(pre_light), "preflight_verdict": report.verdict}
    lines = [
        f"device {tr.device}, torch threads {torch.get_num_threads()}, model {n_params / 1e6:.2f}M params "
        f"(d_model {cfg.model.d_model}, {cfg.model.n_layers} layers), batch {cfg.train.batch_size}x"
        f"{cfg.model.context}, health.interval {interval}, {args.rounds} ABBA rounds of {block} steps, every live "
        f"check on (optimizer and total steps given); machine load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores (a busy machine scatters the ABBA ratios; the time inside the calls is the figure)",
        *(f"{w} wiring: step {fig['step_ms_off']:.1f} ms off, {fig['step_ms_on']:.1f} ms on -> overhead "
          f"{fig['overhead_total']:+.2%} (ratio of totals), {fig['overhead_median_round']:+.2%} (median of per-round "
          f"ratios); time inside the monitor calls {fig['monitor_share']:.2%} of the monitored step time "
          f"({fig['inside_ms_per_step']:.3f} ms per step); target <= 2%; monitor verdict {fig['monitor_verdict']}"
          for w, fig in wirings.items()),
        f"preflight (default model, all checks): {statistics.median(pre_full):.2f} s median of "
        f"{len(pre_full)} (verdict {report.verdict}); without the training checks: "
        f"{statistics.median(pre_light):.2f} s",
    ]
    print("\n".join(lines))
    if args.out:
        from benchmarks._results import write_results

        write_results(args.out, "bench_health", result,
                      ["# Health-check cost (benchmarks/bench_health.py)", "", *(f"- {line}" for line in lines)])


def _run_config(overrides: list[str]) -> dict:
    """The conf/ defaults (benchmarks/bench_checkpoint.py); where conf/ no longer holds the group files (the
    trainer's groups moved into its dataclasses), the same defaults from train.config, with key=value overrides."""
    try:
        return default_run_config(overrides)
    except FileNotFoundError:
        import yaml

        cfg: dict = {"seed": 0}
        for o in overrides:
            key, _, value = o.partition("=")
            section, leaf = key.split(".", 1)
            cfg.setdefault(section, {})[leaf] = yaml.safe_load(value)
        return cfg


def _overhead(tr, cfg, monitor, wiring: str, block: int, rounds: int) -> dict:
    """ABBA rounds of `block` training steps with and without the monitor, wired as `wiring` says."""
    import torch

    inside = [0.0]
    step_no = [0]

    def step(with_monitor: bool) -> None:
        x, y = tr.batch()
        _, loss = tr.model(x, y)
        tr.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(tr.model.parameters(), cfg.train.grad_clip)
        loss_value = loss.item()
        if with_monitor:
            t0 = time.perf_counter()
            if wiring == "trainer":
                monitor.after_backward(step_no[0], loss_value, grad_norm)
            else:
                monitor.after_backward(step_no[0], loss)
            inside[0] += time.perf_counter() - t0
        tr.optimizer.step()
        if with_monitor:
            t0 = time.perf_counter()
            monitor.after_step(step_no[0])
            inside[0] += time.perf_counter() - t0
        tr.scheduler.step()
        step_no[0] += 1
        if tr.device.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(block):                             # warm-up, both paths
        step(True)
        step(False)
    inside[0] = 0.0
    on_s, off_s = [], []
    for r in range(rounds):
        for with_monitor in ((True, False) if r % 2 == 0 else (False, True)):
            t0 = time.perf_counter()
            for _ in range(block):
                step(with_monitor)
            (on_s if with_monitor else off_s).append(time.perf_counter() - t0)
    on_ms = sum(on_s) / (len(on_s) * block) * 1e3
    off_ms = sum(off_s) / (len(off_s) * block) * 1e3
    return {"step_ms_off": off_ms, "step_ms_on": on_ms, "overhead_total": on_ms / off_ms - 1,
            "overhead_median_round": statistics.median(a / b for a, b in zip(on_s, off_s)) - 1,
            "monitor_share": inside[0] / sum(on_s), "inside_ms_per_step": inside[0] / (len(on_s) * block) * 1e3}


def zoo(args) -> None:
    """preflight() wall time on each zoo model (broken and healthy twin), best of --preflight-reps."""
    import torch

    from sweeper.health import preflight
    from tests.helpers import health_zoo, health_zoo2

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    builds = [(f"{name}[{'bug' if bug else 'ok'}]", (lambda c=c, bug=bug: c.build(bug).preflight_kwargs()))
              for name, c in health_zoo.CASES.items() for bug in (True, False)]
    builds += [(f"{name}[{'bug' if bug else 'ok'}]", (lambda c=c, bug=bug: c.build(bug)))
               for name, c in health_zoo2.CASES.items() for bug in (True, False)]
    preflight(**builds[0][1]())                                         # warm-up (imports, scipy)
    times = {}
    for name, build in builds:
        best = float("inf")
        for _ in range(args.preflight_reps):
            kwargs = build()
            t0 = time.perf_counter()
            preflight(**kwargs)
            best = min(best, time.perf_counter() - t0)
        times[name] = best
    ordered = sorted(times.values())
    result = {"threads": 1, "models": len(times), "median_s": statistics.median(ordered), "max_s": ordered[-1],
              "per_model_s": times}
    slowest = sorted(times, key=times.get, reverse=True)[:3]
    lines = [f"preflight on {len(times)} zoo models (tests/health_zoo*.py, broken and healthy), 1 thread, best of "
             f"{args.preflight_reps}: median {result['median_s']:.2f} s, max {result['max_s']:.2f} s "
             f"(slowest: {', '.join(f'{n} {times[n]:.2f} s' for n in slowest)}); budget about 1 s per model"]
    print("\n".join(lines))
    if args.out:
        from benchmarks._results import write_results

        write_results(args.out, "bench_health_zoo", result,
                      ["# Preflight time per zoo model (benchmarks/bench_health.py --zoo)", "",
                       *(f"- {line}" for line in lines), "", "| model | s |", "|---|---|",
                       *(f"| {n} | {t:.3f} |" for n, t in times.items())])


def data_zoo(args) -> None:
    """preflight() wall time on each data-zoo model (broken and healthy twin): all checks, and without the data and
    evaluation checks; best of --preflight-reps (a fresh build per repetition: the loaders restart)."""
    import torch

    from sweeper.health import preflight
    from sweeper.health.data_checks import DATA_CHECKS, EVAL_CHECKS
    from tests.helpers import health_data_zoo

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    builds = [(f"{name}[{'bug' if bug else 'ok'}]", (lambda c=c, bug=bug: c.build(bug, 0)))
              for name, c in health_data_zoo.CASES.items() for bug in (True, False)]
    preflight(**builds[0][1]())                                         # warm-up (imports, scipy)
    full, without, cpu = {}, {}, {}
    for name, build in builds:
        for skip, into in (((), full), (DATA_CHECKS + EVAL_CHECKS, without)):
            best = best_cpu = float("inf")
            for _ in range(args.preflight_reps):
                kwargs = build()
                t0, c0 = time.perf_counter(), time.process_time()
                preflight(**kwargs, skip=skip)
                best = min(best, time.perf_counter() - t0)
                best_cpu = min(best_cpu, time.process_time() - c0)
            into[name] = best
            if not skip:
                cpu[name] = best_cpu
    share = {n: full[n] - without[n] for n in full}
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    result = {"threads": 1, "models": len(full), "median_s": statistics.median(full.values()),
              "max_s": max(full.values()), "median_cpu_s": statistics.median(cpu.values()),
              "median_data_checks_s": statistics.median(share.values()), "max_data_checks_s": max(share.values()),
              "load_average_1min": load, "cpus": os.cpu_count(), "per_model_s": full, "per_model_cpu_s": cpu,
              "per_model_without_data_checks_s": without}
    slowest = sorted(full, key=full.get, reverse=True)[:3]
    lines = [
        f"preflight on {len(full)} data-zoo models (tests/helpers/health_data_zoo.py, broken and healthy, seed 0, with "
        f"their loader/val_data/evaluate), 1 thread, best of {args.preflight_reps}: median "
        f"{result['median_s']:.3f} s, max {result['max_s']:.2f} s (slowest: "
        f"{', '.join(f'{n} {full[n]:.2f} s' for n in slowest)}); target median <= 0.5 s; process CPU "
        f"time median {result['median_cpu_s']:.3f} s (load average {load} on {os.cpu_count()} CPUs)",
        f"the data and evaluation checks' own share (all checks minus the run without them): median "
        f"{result['median_data_checks_s'] * 1e3:.0f} ms, max {result['max_data_checks_s'] * 1e3:.0f} ms per model",
    ]
    print("\n".join(lines))
    if args.out:
        from benchmarks._results import write_results

        write_results(
            args.out,
            "bench_health_data_zoo",
            result,
            [
                "# Preflight time per data-zoo model (benchmarks/bench_health.py --data-zoo)",
                "",
                *(f"- {line}" for line in lines),
                "",
                "| model | all checks, s | without data checks, s |",
                "|---|---|---|",
                *(f"| {n} | {full[n]:.3f} | {without[n]:.3f} |" for n in full),
            ],
        )


if __name__ == "__main__":
    main()
