"""The GPU proof in one short device session: <= 7 minutes on an H200, results written as it goes.

    python benchmarks/gpu_check.py [--out DIR]          # on the GPU (DIR: $OUT, else benchmarks/results)
    python benchmarks/gpu_check.py --smoke [--out DIR]  # every step on CPU: tiny shapes, Triton interpreter, < 2 min
    python benchmarks/gpu_check.py --only bench_rope    # some steps (comma-separated names)

Steps, each in its own process with its own time limit (a hang, a crash or a CUDA error ends that step only;
the limits add up to 450 s within a 420 s total: the last step gets what is left, and a step never starts with
less time left than it needs to be useful):
  env                device name, memory, driver, torch / CUDA / Triton / Liger versions, git commit
  kernel_tests       the RoPE tests on CUDA (fp32/bf16/fp16, both layouts, positions, GQA, partial rotary, compile)
  train_determinism  a short training run on CUDA, three processes at once: two must end bitwise equal, the
                     third is SIGKILLed mid-run, resumed, and must end bitwise equal to them
  ddp_smoke          the data-parallel path on one GPU: the trainer as rank 0 of a world of 1 (torchrun's
                     variables, a held MASTER_PORT, NCCL; --smoke: gloo on CPU) beside the same run without
                     ranks, and a third SIGKILLed mid-run and resumed: all three must end bitwise equal
  bench_rope         benchmarks/bench_rope.py cuda: fwd and fwd+bwd bandwidth vs eager, torch.compile, Liger
  pool_throughput    the local pool on one GPU: the same 4 runs with 1 (one after another), 2 and 4 runs per device
Files, all under DIR and rewritten after every step: gpu_check.{json,md} (the summary: device, versions, each
step's verdict, seconds and figures), gpu_<step>.{json,md}/.log per step, bench_rope_cuda.{json,md} (--smoke:
the same names with gpu_smoke_ in front, so a dry run never overwrites measured results).
Liger on a machine without network: beforehand `pip download liger-kernel --no-deps -d .whl` and carry `.whl`;
its pure-Python wheel is put on PYTHONPATH for the bench step only (nothing is installed).
Exit status: 0 when every step passed, else 1.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks._results import write_results  # noqa: E402

TOTAL_S, SMOKE_TOTAL_S = 420, 600
# name -> (limit on a GPU, limit in --smoke, the least time worth starting it with). The smoke limits leave room
# for a loaded shared CPU (the smoke run takes ~1.5 min on an idle 2-core machine, 2.5-4 min on a busy one).
STEPS = {"env": (15, 60, 5), "kernel_tests": (110, 120, 30), "train_determinism": (60, 150, 30),
         "ddp_smoke": (35, 150, 25), "bench_rope": (130, 120, 40), "pool_throughput": (100, 150, 40)}


def _py(*args: str) -> list[str]:
    return [sys.executable, *args]


def _env(smoke: bool, extra_path: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEEPER_AUDIT")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), extra_path, env.get("PYTHONPATH")) if p)
    if smoke:
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)            # real CUDA kernels, not the CPU interpreter
    return env


# ------------------------------------------------------------------------------------------------ steps
def step_env(args) -> dict:
    import torch
    import triton
    info = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "triton": triton.__version__, "cuda_available": torch.cuda.is_available(), "smoke": args.smoke,
            "host": platform.node()}
    try:
        from importlib.metadata import version
        info["liger_kernel"] = version("liger-kernel")
    except Exception:  # noqa: BLE001
        info["liger_kernel"] = _liger_wheel() or None
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(device=p.name, memory_gib=round(p.total_memory / 2**30, 1), sm_count=p.multi_processor_count,
                    capability=f"{p.major}.{p.minor}", l2_bytes=getattr(p, "L2_cache_size", None))
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.memory",
                              "--format=csv,noheader"], capture_output=True, text=True)
        info["nvidia_smi"] = smi.stdout.strip()
    else:
        info["device"] = f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores): smoke run"
    git = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    info["git"] = git.stdout.strip() or None
    if not args.smoke and not torch.cuda.is_available():
        raise SystemExit("no CUDA device visible (use --smoke on a CPU machine)")
    return info


def step_kernel_tests(args) -> dict:
    files = ["tests/test_rope_compile.py"] if args.smoke else \
        [f"tests/test_rope_{n}.py" for n in ("numerics", "layouts", "training", "compile")]
    select = ["-k", "float64_tables"] if args.smoke else []
    xml = Path(args.out) / f"{args.prefix}kernel_tests.xml"
    # -o addopts=-ra: one process on the GPU (no -n 2 from pyproject; pytest-xdist may not be installed there)
    proc = subprocess.run(_py("-m", "pytest", "-q", "-o", "addopts=-ra", "-p", "no:cacheprovider", *files, *select,
                              f"--junitxml={xml}"), cwd=ROOT, env=_env(args.smoke), capture_output=True, text=True)
    sys.stdout.write(proc.stdout[-20000:] + proc.stderr[-5000:])
    counts = _junit_counts(xml)
    if proc.returncode != 0 or not counts.get("tests"):
        raise StepFailed(f"pytest exit {proc.returncode}: {counts}", counts)
    return counts


def _junit_counts(xml: Path) -> dict:
    import xml.etree.ElementTree as ET
    try:
        suite = ET.parse(xml).getroot()
    except (OSError, ET.ParseError):
        return {}
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    return {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}


def step_train_determinism(args) -> dict:
    sys.path.insert(0, str(ROOT / "tests"))
    import tests.helpers.train_runs as tr

    device = "cpu" if args.smoke else "cuda"
    steps, kill_at = (12, 7) if args.smoke else (60, 37)
    extra = {} if args.smoke else {"model.d_model": 256, "model.n_layers": 4, "model.n_heads": 4,
                                   "model.context": 128, "train.batch_size": 32}
    cfg = tr.tiny_config(seed=3, **{"train.device": device, "train.steps": steps, "train.ckpt_interval": 5,
                                    **extra})
    out = {"device": device, "steps": steps, "killed_at_step": kill_at}
    with tempfile.TemporaryDirectory() as tmp:
        ref, again, killed = (tr.make_run_dir(Path(tmp) / n, cfg) for n in ("ref", "again", "killed"))
        t0 = time.perf_counter()      # all three at once: one device, three processes
        procs = [tr.start(ref), tr.start(again), tr.start(killed, SWEEPER_AUDIT_KILL_AT_STEP=str(kill_at))]
        codes = [tr.finish(p, d) for p, d in zip(procs, (ref, again, killed))]
        out["three_runs_s"] = round(time.perf_counter() - t0, 2)
        out["kill_exit"] = codes[2]
        if codes != [0, 0, -9]:
            raise StepFailed(f"exit codes {codes} (want 0, 0, -9 = SIGKILL): {tr.log_text(ref)[-1500:]}", out)
        tr.assert_bitwise_equal(ref, again)
        out["repeat_bitwise_equal"] = True
        code = tr.train(killed)
        if code != 0:
            raise StepFailed(f"the resumed run exited {code}: {tr.log_text(killed)[-1500:]}", out)
        tr.assert_bitwise_equal(ref, killed)
        out["resume_bitwise_equal"] = True
        from sweeper.run.files.rundir import RunDir
        out["final"] = RunDir(ref).read_summary().final
    return out


def step_ddp_smoke(args) -> dict:
    """World size 1 through the data-parallel path (NCCL on the GPU) must change no bit of the training run."""
    sys.path.insert(0, str(ROOT / "tests"))
    import tests.helpers.train_runs as tr
    from sweeper.backends.local.ranks import HeldPort, rank_env
    from sweeper.run.files.rundir import RunDir

    device = "cpu" if args.smoke else "cuda"
    steps, kill_at = (12, 7) if args.smoke else (40, 23)
    cfg = tr.tiny_config(seed=5, **{"train.device": device, "train.steps": steps, "train.ckpt_interval": 5})
    out = {"device": device, "steps": steps, "killed_at_step": kill_at}
    with tempfile.TemporaryDirectory() as tmp:
        plain, ddp, killed = (tr.make_run_dir(Path(tmp) / n, cfg) for n in ("plain", "ddp", "killed"))
        ports = [HeldPort(), HeldPort()]

        def ranked(run_dir, port, **extra):      # rank 0 of 1, as the local pool starts a rank
            env = rank_env(tr.train_env(**extra), 0, 1, port.port, [os.environ.get("CUDA_VISIBLE_DEVICES", "0")
                                                                    .split(",")[0] if device == "cuda" else None])
            with open(run_dir / "stdout.log", "ab") as log:
                return subprocess.Popen(_py("-m", "sweeper.train", str(run_dir)), cwd=ROOT, env=env, stdout=log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        t0 = time.perf_counter()
        procs = [tr.start(plain), ranked(ddp, ports[0]),
                 ranked(killed, ports[1], SWEEPER_AUDIT_KILL_AT_STEP=str(kill_at))]
        codes = [tr.finish(p, d) for p, d in zip(procs, (plain, ddp, killed))]
        out["three_runs_s"] = round(time.perf_counter() - t0, 2)
        if codes != [0, 0, -9]:
            raise StepFailed(f"exit codes {codes} (want 0, 0, -9): {tr.log_text(ddp)[-1500:]}", out)
        summary = RunDir(ddp).read_summary()
        out["distributed"] = summary.extra.get("distributed")
        out["fingerprint"] = {k: summary.fingerprint.get(k) for k in ("world_size", "device_model", "device")}
        want = "gloo" if args.smoke else "nccl"
        if (out["distributed"] or {}).get("backend") != want or summary.fingerprint.get("world_size") != 1:
            raise StepFailed(f"the ranked run did not train as rank 0 of 1 over {want}: {out['distributed']}", out)
        tr.assert_bitwise_equal(plain, ddp)
        out["ws1_bitwise_equal_to_plain"] = True
        proc = ranked(killed, ports[1])
        if tr.finish(proc, killed) != 0:
            raise StepFailed(f"the resumed run failed: {tr.log_text(killed)[-1500:]}", out)
        tr.assert_bitwise_equal(plain, killed)
        out["resume_bitwise_equal"] = True
        out["final"] = summary.final
        for port in ports:
            port.close()
    return out


def step_bench_rope(args) -> dict:
    wheel_dir = _unpack_liger()
    cmd = _py("benchmarks/bench_rope.py", "cuda", "--out", args.out, "--budget-s",
              str(max(10, args.time_left - 20)), *(["--smoke"] if args.smoke else []))
    proc = subprocess.run(cmd, cwd=ROOT, env=_env(args.smoke, wheel_dir), capture_output=True, text=True)
    sys.stdout.write(proc.stdout[-20000:] + proc.stderr[-5000:])
    src = Path(args.out) / "bench_rope_cuda.json"
    result = json.loads(src.read_text()) if src.exists() else {}
    if args.smoke:   # a dry run's figures must not sit where measured ones go
        for ext in ("json", "md"):
            p = Path(args.out) / f"bench_rope_cuda.{ext}"
            if p.exists():
                p.replace(Path(args.out) / f"{args.prefix}bench_rope_cuda.{ext}")
    rows = [r for r in result.get("rows", []) if "fwd_s" in r]
    best = {}
    for r in rows:
        key = f"T={r['T']} {r['layout']} {r['positions']}"
        if r["impl"] == "triton (ours)":
            best[key] = {"fwd_frac_peak": round(r["fwd_frac_peak"], 3),
                         "fwd_bwd_frac_peak": round(r["fwd_bwd_frac_peak"], 3),
                         "x_liger_fwd": r.get("speedup_vs_liger_fwd"),
                         "x_liger_fwd_bwd": r.get("speedup_vs_liger_fwd_bwd")}
    summary = {"rows_measured": len(rows), "complete": result.get("complete"), "ours": best,
               "liger": result.get("liger"), "liger_error": result.get("liger_error")}
    if proc.returncode != 0:
        raise StepFailed(f"bench_rope exit {proc.returncode}", summary)
    return summary


def _liger_wheel() -> str | None:
    wheels = sorted(glob.glob(str(ROOT / ".whl" / "liger_kernel-*.whl")))
    return Path(wheels[-1]).name if wheels else None


def _unpack_liger() -> str | None:
    name = _liger_wheel()
    if not name:
        return None
    target = tempfile.mkdtemp(prefix="liger_")
    with zipfile.ZipFile(ROOT / ".whl" / name) as z:
        z.extractall(target)
    return target


def step_pool_throughput(args) -> dict:
    """The same 4 runs (seeds 0-3 of one variant) under the local pool on ONE device with 1, 2 and 4 runs per
    device; 1 per device is the runs launched one after another. Throughput = runs / sweep wall time."""
    from sweeper.run.files.rundir import RunDir
    if args.smoke:
        model = ["model.d_model=32", "model.n_layers=1", "model.n_heads=2", "model.context=32",
                 "train.batch_size=8", "train.steps=5", "train.device=cpu"]
        per_device, seeds, device_env = (1, 2), "0-1", {"CUDA_VISIBLE_DEVICES": "0"}   # a fake device id
    else:
        model = ["model.d_model=512", "model.n_layers=6", "model.n_heads=8", "model.context=256",
                 "train.batch_size=32", "train.steps=120", "train.device=cuda"]
        per_device, seeds, device_env = (1, 2, 4), "0-3", {"CUDA_VISIBLE_DEVICES": os.environ.get(
            "CUDA_VISIBLE_DEVICES", "0").split(",")[0]}
    common = ["+experiment=rope", "~experiment.variants.nope", "~experiment.variants.rope_frozen_qk",
              f"seeds={seeds}", "train.eval_interval=1000", "train.log_interval=20", "train.ckpt_interval=1000",
              "train.eval_batches=2", "train.warmup_steps=2", "data.n_files=8", "health.preflight=false",
              "sweeper.report=false", *model]
    out = {"model": model, "runs": len(_seeds(seeds)), "configs": []}
    with tempfile.TemporaryDirectory() as tmp:
        for n in per_device:
            d = Path(tmp) / f"rpd{n}"
            t0 = time.perf_counter()
            proc = subprocess.run(_py("-m", "sweeper", *common, f"sweeper.dir={d}", f"launcher.runs_per_device={n}"),
                                  cwd=ROOT, env={**_env(args.smoke), **device_env, "SWEEPER_PROGRESS": "plain"},
                                  capture_output=True, text=True)
            wall = time.perf_counter() - t0
            if proc.returncode != 0:
                raise StepFailed(f"runs_per_device={n}: exit {proc.returncode}: {proc.stderr[-1500:]}", out)
            run_walls = [RunDir(p).read_summary().wall_time_s for p in sorted((d / "runs").glob("*/seed_*"))]
            out["configs"].append({"runs_per_device": n, "sweep_wall_s": round(wall, 2),
                                   "runs_per_min": round(60 * len(run_walls) / wall, 2),
                                   "mean_run_wall_s": round(sum(run_walls) / len(run_walls), 2)})
            print(out["configs"][-1], flush=True)
    base = out["configs"][0]["runs_per_min"]
    for c in out["configs"]:
        c["throughput_vs_sequential"] = round(c["runs_per_min"] / base, 3)
    return out


def _seeds(spec: str) -> list[int]:
    lo, hi = spec.split("-")
    return list(range(int(lo), int(hi) + 1))


class StepFailed(Exception):
    def __init__(self, message: str, data: dict | None = None):
        super().__init__(message)
        self.data = data or {}


STEP_FUNCS = {"env": step_env, "kernel_tests": step_kernel_tests, "train_determinism": step_train_determinism,
              "ddp_smoke": step_ddp_smoke, "bench_rope": step_bench_rope, "pool_throughput": step_pool_throughput}


def run_one(args) -> int:
    """Child process: run one step, write gpu_<step>.json/.md, exit 0 (pass) or 1 (fail)."""
    name = args.step
    t0 = time.perf_counter()
    try:
        data, verdict, why = STEP_FUNCS[name](args), "pass", None
    except StepFailed as e:
        data, verdict, why = e.data, "fail", str(e)
    except (Exception, SystemExit, AssertionError) as e:  # noqa: BLE001 - the verdict records it
        data, verdict, why = {}, "fail", f"{type(e).__name__}: {e}"[:2000]
    result = {"step": name, "verdict": verdict, "why": why, "seconds": round(time.perf_counter() - t0, 1),
              "data": data}
    write_results(args.out, f"{args.prefix}{name}", result,
                  [f"# {name}: {verdict} in {result['seconds']} s", "", *( [f"why: {why}", ""] if why else []),
                   "```json", json.dumps(data, indent=1, default=str)[:20000], "```"])
    return 0 if verdict == "pass" else 1


def summary_table(summary: dict) -> list[str]:
    env = summary.get("env", {})
    lines = [f"# GPU check{' (smoke run on CPU: timings meaningless)' if summary['smoke'] else ''}", "",
             f"Device: {env.get('device', '?')}; torch {env.get('torch')}, CUDA {env.get('cuda')}, triton "
             f"{env.get('triton')}, liger-kernel {env.get('liger_kernel')}; git {str(env.get('git'))[:12]}; "
             f"started {summary['started']}; {summary['elapsed_s']} s of "
             f"{SMOKE_TOTAL_S if summary['smoke'] else TOTAL_S} s.", "",
             "| step | verdict | seconds | limit | figures |", "|---|---|---|---|---|"]
    for s in summary["steps"]:
        figures = json.dumps(s.get("data", {}), default=str)
        lines.append(f"| {s['step']} | {s['verdict']} | {s['seconds']} | {s['limit_s']} | "
                     f"{(s.get('why') or '') + ' ' if s['verdict'] != 'pass' else ''}{figures[:400]} |")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "benchmarks" / "results"))
    p.add_argument("--smoke", action="store_true", help="every step on CPU, tiny shapes, Triton interpreter")
    p.add_argument("--only", default=None, help=f"comma-separated steps out of {','.join(STEPS)}")
    p.add_argument("--step", choices=list(STEPS), help=argparse.SUPPRESS)       # internal: run one step
    p.add_argument("--time-left", type=float, default=60, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.prefix = "gpu_smoke_" if args.smoke else "gpu_"
    Path(args.out).mkdir(parents=True, exist_ok=True)
    if args.step:
        return run_one(args)
    names = list(STEPS) if args.only is None else [n.strip() for n in args.only.split(",") if n.strip()]
    bad = [n for n in names if n not in STEPS]
    if bad:
        p.error(f"--only: unknown step(s) {bad}; steps are {','.join(STEPS)}")
    start = time.monotonic()
    summary = {"smoke": args.smoke, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "steps": [],
               "elapsed_s": 0, "env": {}}
    failed = 0
    for name in names:
        limit, smoke_limit, least = STEPS[name]
        left = (SMOKE_TOTAL_S if args.smoke else TOTAL_S) - (time.monotonic() - start)
        limit = min(smoke_limit if args.smoke else limit, left)
        entry = {"step": name, "limit_s": round(limit)}
        if limit < least:
            entry.update(verdict="skipped", seconds=0, why=f"{left:.0f} s left of the total")
        else:
            t0 = time.monotonic()
            record = Path(args.out) / f"{args.prefix}{name}.json"
            record.unlink(missing_ok=True)                   # never read an earlier run's verdict
            cmd = _py(str(Path(__file__).resolve()), "--step", name, "--out", args.out, "--time-left", str(limit),
                      *(["--smoke"] if args.smoke else []))
            with open(Path(args.out) / f"{args.prefix}{name}.log", "w") as log:
                proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(args.smoke), stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
                try:
                    rc = proc.wait(timeout=limit)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)   # the step and everything it started
                    proc.wait()
                    rc = None
            entry["seconds"] = round(time.monotonic() - t0, 1)
            try:
                rec = json.loads(record.read_text())
            except (OSError, ValueError):
                rec = {"verdict": "fail", "data": {}, "why": f"the step wrote no record (exit {rc}); see its log"}
            if rc is None:
                rec = {**rec, "verdict": "fail", "why": f"time limit {limit:.0f} s reached"}
            entry.update(verdict=rec.get("verdict", "fail"), data=rec.get("data", {}), why=rec.get("why"))
            if name == "env":
                summary["env"] = entry["data"]
        failed += entry["verdict"] != "pass"
        summary["steps"].append(entry)
        summary["elapsed_s"] = round(time.monotonic() - start, 1)
        write_results(args.out, f"{args.prefix}check", summary, summary_table(summary))
        print(f"{name}: {entry['verdict']} in {entry.get('seconds', 0)} s"
              + (f" ({entry['why']})" if entry.get("why") and entry["verdict"] != "pass" else ""), flush=True)
    print(f"results: {Path(args.out) / (args.prefix + 'check.md')}; failed steps: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
