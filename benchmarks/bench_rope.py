"""RoPE benchmarks, measured side by side in one run.

    python benchmarks/bench_rope.py cpu  [--out DIR] [--steps 60] [--threads 1]
        RoPE's share of a training step of the default model (train/ ModelConfig, B=32) on CPU, against the
        same model without positional encoding (NoPE) and with the reference (torch.cat) rotation.
    python benchmarks/bench_rope.py cuda --out DIR [--max-t T] [--budget-s 150]
        Forward and forward+backward (each ONE timed op) and achieved bandwidth (fraction of the device's peak)
        for Llama-8B-like shapes (Hq=32, Hk=8, D=128, bf16) at an L2-resident T and at the T where q + k exceed
        L2 4x, half and interleaved, without and with position ids: our Triton kernel, our PyTorch path, the
        eager reference, torch.compile of it and Liger-Kernel's RoPE (half layout; if it imports). Every row's
        forward and gradient error is checked against a tolerance; the step fails if one of ours exceeds it.
        --smoke: tiny shapes; on a machine without a GPU, the same code on CPU (TRITON_INTERPRET=1).
    python benchmarks/bench_rope.py determinism --out DIR [--tag NAME]
        Hashes of forward/backward outputs over repeated CUDA calls (compare across processes).

Each mode writes bench_rope_<mode>.json and .md (device name included) into DIR and prints the table.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks._results import write_results  # noqa: E402


def publish(out_dir: str, mode: str, result: dict, table: list[str], quiet: bool = False) -> None:
    """Atomically write bench_rope_<mode>.json and .md into out_dir; print the table (unless quiet)."""
    write_results(out_dir, f"bench_rope_{mode}", result, table)
    if not quiet:
        print("\n".join(table))


# ----------------------------------------------------------------------------------------------- CPU
def bench_cpu(args) -> None:
    import torch

    from sweeper.kernels import apply_rope, rope_cache
    from sweeper.train.config import ModelConfig, TrainConfig
    from sweeper.train.model import Transformer

    torch.set_num_threads(args.threads)
    cfg, batch = ModelConfig(), TrainConfig().batch_size
    variants = {"nope": ("none", "auto"), "rope_fast": ("rope", "torch"), "rope_reference": ("rope", "reference")}
    models = {}
    for name, (pe, impl) in variants.items():
        torch.manual_seed(0)
        m = Transformer(ModelConfig(**{**cfg.__dict__, "pos_encoding": pe, "rope_impl": impl}), vocab_size=99)
        models[name] = (m, torch.optim.AdamW(m.parameters(), lr=3e-3))
    x = torch.randint(0, 99, (batch, cfg.context + 1), generator=torch.Generator().manual_seed(0))

    def step(m, opt):
        _, loss = m(x[:, :-1], x[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    times = {n: [] for n in models}
    for i in range(args.steps + 5):          # round-robin, one step each, so load drift hits all alike
        names = list(models)[i % 3:] + list(models)[:i % 3]
        for n in names:
            t0 = time.perf_counter()
            step(*models[n])
            if i >= 5:
                times[n].append(time.perf_counter() - t0)
    med = {n: statistics.median(v) for n, v in times.items()}

    # direct: apply_rope forward+backward on the model's q/k shapes, n_layers times per step
    hd = cfg.d_model // cfg.n_heads
    cos, sin = rope_cache(cfg.context, hd)
    q = torch.randn(batch, cfg.context, cfg.n_heads, hd, requires_grad=True)
    k = torch.randn(batch, cfg.context, cfg.n_heads, hd, requires_grad=True)
    direct = {}
    for impl in ("torch", "reference"):
        samples = []
        for i in range(args.steps + 5):
            t0 = time.perf_counter()
            qo, ko = apply_rope(q, k, cos, sin, impl=impl)
            torch.autograd.backward((qo, ko), (qo, ko))
            if i >= 5:
                samples.append(time.perf_counter() - t0)
        direct[impl] = statistics.median(samples) * cfg.n_layers
    # paired: per round, (rope step - NoPE step); the median difference over the median RoPE step
    share = {n: statistics.median(a - b for a, b in zip(times[n], times["nope"])) / med[n]
             for n in ("rope_fast", "rope_reference")}
    result = {"mode": "cpu", "device": platform.processor() or platform.machine(), "threads": args.threads,
              "torch": torch.__version__, "model": cfg.__dict__, "batch": batch, "steps_timed": args.steps,
              "median_step_s": med, "steps_per_s": {n: 1 / v for n, v in med.items()},
              "rope_share_of_step": share,
              "rope_fwd_bwd_s_per_step": direct,
              "rope_direct_share": {i: direct[i] / med[f"rope_{'fast' if i == 'torch' else 'reference'}"]
                                    for i in direct}}
    table = [f"# RoPE on CPU: share of a training step ({result['device']}, {args.threads} thread(s), "
             f"torch {torch.__version__})", "",
             f"Model: d={cfg.d_model}, {cfg.n_layers} layers, {cfg.n_heads} heads, T={cfg.context}, B={batch}; "
             f"median of {args.steps} round-robin steps; share = median paired (RoPE - NoPE) step time "
             "difference / RoPE step time; direct = timed apply_rope forward+backward on the model's q/k shapes.", "",
             "| variant | step ms | steps/s | RoPE share (step vs NoPE) | RoPE fwd+bwd ms/step (direct) "
             "| direct share |",
             "|---|---|---|---|---|---|"]
    for n in models:
        impl = {"rope_fast": "torch", "rope_reference": "reference"}.get(n)
        table.append(f"| {n} | {med[n] * 1e3:.2f} | {1 / med[n]:.1f} | "
                     f"{f'{share[n]:.1%}' if impl else '-'} | {f'{direct[impl] * 1e3:.2f}' if impl else '-'} | "
                     f"{f'{direct[impl] / med[n]:.1%}' if impl else '-'} |")
    publish(args.out, "cpu", result, table)


# ---------------------------------------------------------------------------------------------- CUDA
def peak_bandwidth(torch) -> tuple[float, str]:
    """Device peak DRAM bandwidth in bytes/s, from the reported bus width and memory clock."""
    p = torch.cuda.get_device_properties(0)
    width, clock = getattr(p, "memory_bus_width", 0), getattr(p, "memory_clock_rate", 0)
    if width and clock:
        return 2 * width / 8 * clock * 1e3, f"2 x {width}-bit bus x {clock / 1e6:.3f} GHz"
    known = {"H200": 4.8e12, "H100": 3.35e12, "A100": 2.0e12, "B200": 8.0e12, "L4": 3.0e11}
    for key, bw in known.items():
        if key in p.name:
            return bw, f"datasheet value for {key}"
    raise SystemExit(f"unknown peak bandwidth for {p.name}: add it to peak_bandwidth()")


def l2_bytes(torch) -> int:
    return int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 50 * 2**20)


def seqlens_for(torch, smoke: bool, hq: int, hk: int, d: int, elem: int, max_t: int | None) -> list[int]:
    """An L2-resident T (2048) and the smallest power-of-two T whose q + k exceed the L2 cache 4x (HBM-bound)."""
    if smoke:
        return [64]
    per_token = (hq + hk) * d * elem
    big = 4096
    while big * per_token < 4 * l2_bytes(torch):
        big *= 2
    return sorted({t for t in (2048, big) if max_t is None or t <= max_t})


def liger_rope():
    """Liger-Kernel's RoPE as f(q, k, cos_full, sin_full) -> (q', k'), or (None, why). Current Liger: apply(q, k,
    cos, sin, position_ids=None, unsqueeze_dim=1) with q (B, H, T, D), cos (1|B, T, D) full width (the first dim
    is read as batch), returning FOUR tensors (q, k, cos, sin), rotating q and k IN PLACE; older releases returned
    two. Only the first two outputs are used; the caller passes tables already shaped (1|B, T, D)."""
    try:
        from liger_kernel.ops.rope import LigerRopeFunction
    except Exception as e:  # noqa: BLE001 - report why it is missing, keep going
        return None, f"{type(e).__name__}: {e}"

    def fn(q, k, cos_full, sin_full):
        out = LigerRopeFunction.apply(q, k, cos_full, sin_full)
        return out[0], out[1]
    return fn, None


def tolerance(dtype) -> float:
    """Max |error| allowed against the float32-math reference rounded to dtype: one rounding of |x| < 8."""
    import torch
    return {torch.bfloat16: 2 ** -5, torch.float16: 2 ** -8, torch.float32: 1e-5}[dtype]


def bench_cuda(args) -> None:
    """Forward and forward+backward, each timed as ONE op, for every (T, layout, positions) case and impl;
    results are republished after every row, so a time limit keeps what was measured."""
    import torch
    import triton

    from sweeper.kernels import apply_rope, rope_cache, rope_reference
    from sweeper.kernels.reference import _rotate as reference_rotate

    if not torch.cuda.is_available() and not args.smoke:
        raise SystemExit("cuda mode needs a CUDA GPU (--smoke runs the same code on CPU, tiny shapes)")
    smoke_cpu = not torch.cuda.is_available()   # --smoke without a GPU: Triton interpreter, wall-clock timer
    dev = torch.device("cpu" if smoke_cpu else "cuda")
    name = "CPU smoke run (timings meaningless)" if smoke_cpu else torch.cuda.get_device_name(0)
    peak, peak_src = (1e10, "placeholder") if smoke_cpu else peak_bandwidth(torch)
    deadline = time.monotonic() + args.budget_s

    def bench(fn) -> float:
        if smoke_cpu:
            fn()
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0
        from triton.testing import do_bench
        return do_bench(fn, warmup=10, rep=args.rep, return_mode="median") * 1e-3   # flushes L2 between calls

    liger, liger_error = liger_rope()
    Hq, Hk, D, B = (4, 2, 32, 1) if args.smoke else (32, 8, 128, 1)
    dtype = torch.float16 if smoke_cpu else torch.bfloat16     # the interpreter gets bf16 wrong
    elem = torch.tensor([], dtype=dtype).element_size()
    seqlens = seqlens_for(torch, args.smoke, Hq, Hk, D, elem, args.max_t)
    cos, sin = rope_cache(max(seqlens), D, device=dev)
    backend = "aot_eager" if smoke_cpu else "inductor"

    def ref_math(q, k, cos, sin, ids, interleaved):   # the reference's rotation (fp32 math), no host checks
        T = q.shape[2]
        c, s = (cos[:T], sin[:T]) if ids is None else (cos[ids][:, None], sin[ids][:, None])   # (1|B, 1, T, R/2)
        return tuple(reference_rotate(x.float(), c, s, interleaved).to(x.dtype) for x in (q, k))
    ref_compiled = torch.compile(ref_math, backend=backend)
    result = {"mode": "cuda", "device": name, "peak_bytes_per_s": peak, "peak_source": peak_src,
              "l2_bytes": None if smoke_cpu else l2_bytes(torch), "torch": torch.__version__,
              "triton": triton.__version__, "liger": _liger_version(), "liger_error": liger_error,
              "shape": {"B": B, "Hq": Hq, "Hk": Hk, "D": D, "dtype": str(dtype), "format": "bhtd views"},
              "seqlens": seqlens, "rows": [], "complete": False}
    rows = result["rows"]
    cases = [(T, layout, pos) for T in reversed(seqlens) for layout in ("half", "interleaved")
             for pos in ("none", "ids")]                                  # the HBM-bound T first
    if args.smoke:   # the script's every path, fewer cases
        cases = [c for c in cases if (c[1], c[2]) in (("half", "none"), ("interleaved", "ids"))]
    for T, layout, pos in cases:
        g = torch.Generator(device=dev).manual_seed(T)
        # HF/Llama style: projections are (B, T, H, D); attention sees (B, H, T, D) transpose views
        q = torch.randn(B, T, Hq, D, device=dev, generator=g).to(dtype).transpose(1, 2)
        k = torch.randn(B, T, Hk, D, device=dev, generator=g).to(dtype).transpose(1, 2)
        gq, gk = torch.randn_like(q), torch.randn_like(k)
        ids = None if pos == "none" else torch.randint(0, max(seqlens), (B, T), device=dev, generator=g)
        inter = layout == "interleaved"
        bytes_pass = (2 * (q.numel() + k.numel()) * elem + 2 * B * T * (D // 2) * 4
                      + (0 if ids is None else B * T * 8))               # r+w q, k; cos/sin rows; ids
        impls = {
            "triton (ours)": lambda q, k: apply_rope(q, k, cos, sin, ids, layout, "bhtd", "triton"),
            "torch path (ours)": lambda q, k: apply_rope(q, k, cos, sin, ids, layout, "bhtd", "torch"),
            "reference eager": lambda q, k: ref_math(q, k, cos, sin, ids, inter),
            "reference torch.compile": lambda q, k: ref_compiled(q, k, cos, sin, ids, inter),
        }
        if liger is not None and not inter:      # half layout only; tables full width, gathered beforehand
            c_full, s_full = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
            ct, st = (c_full[:T][None], s_full[:T][None]) if ids is None else (c_full[ids], s_full[ids])
            impls["liger"] = lambda q, k: liger(q, k, ct, st)
        want = rope_reference(q, k, cos, sin, ids, layout, "bhtd")
        for label, fn in impls.items():
            if time.monotonic() > deadline:
                rows.append({"T": T, "layout": layout, "positions": pos, "impl": label, "error": "budget spent"})
                continue
            row = {"T": T, "layout": layout, "positions": pos, "impl": label}
            if label == "liger":   # it writes its inputs in place: give it free non-leaf views of the leaves
                fn = (lambda f: lambda q, k: f(q.view_as(q), k.view_as(k)))(fn)
            try:
                got = fn(q.clone(), k.clone())            # clones: Liger rotates its inputs in place
                err = max((a.float() - b.float()).abs().max().item() for a, b in zip(got, want))
                ql, kl = q.detach().clone().requires_grad_(), k.detach().clone().requires_grad_()
                dq, dk = torch.autograd.grad(fn(ql, kl), (ql, kl), (gq.clone(), gk.clone()))
                # backward = rotation by -angle: R(-a) g; compare with the reference's own autograd
                ref_l = q.detach().clone().requires_grad_(), k.detach().clone().requires_grad_()
                rdq, rdk = torch.autograd.grad(rope_reference(*ref_l, cos, sin, ids, layout, "bhtd"), ref_l,
                                               (gq, gk))
                gerr = max((a.float() - b.float()).abs().max().item() for a, b in ((dq, rdq), (dk, rdk)))
                tol = tolerance(dtype)
                row.update(max_abs_err=err, max_abs_grad_err=gerr, tolerance=tol, ok=err <= tol and gerr <= tol)
                qs, ks = q.clone(), k.clone()
                row["fwd_s"] = bench(lambda: fn(qs, ks))
                ql, kl = q.detach().clone().requires_grad_(), k.detach().clone().requires_grad_()
                gql, gkl = gq.clone(), gk.clone()
                row["fwd_bwd_s"] = bench(lambda: torch.autograd.grad(fn(ql, kl), (ql, kl), (gql, gkl)))
                row["fwd_frac_peak"] = bytes_pass / row["fwd_s"] / peak
                row["fwd_bwd_frac_peak"] = 2 * bytes_pass / row["fwd_bwd_s"] / peak
            except Exception as e:  # noqa: BLE001 - one failing competitor must not hide the others
                row["error"] = f"{type(e).__name__}: {e}"[:300]
            rows.append(row)
            _add_speedups(rows)
            publish(args.out, "cuda", result, _cuda_table(result), quiet=True)
    try:
        from sweeper.kernels.rope_triton import _rope_kernel_tuned
        result["autotuned"] = {str(k): str(v) for k, v in getattr(_rope_kernel_tuned, "cache", {}).items()}
    except Exception:  # noqa: BLE001
        pass
    result["complete"] = not any(r.get("error") == "budget spent" for r in rows)
    ours_bad = [r for r in rows if r["impl"].endswith("(ours)") and not r.get("ok")]
    result["ours_all_ok"] = not ours_bad
    publish(args.out, "cuda", result, _cuda_table(result))
    if ours_bad:
        raise SystemExit(f"{len(ours_bad)} of our rows failed or exceeded the tolerance: {ours_bad[:2]}")


def _liger_version() -> str | None:
    try:
        from importlib.metadata import version
        return version("liger-kernel")
    except Exception:  # noqa: BLE001
        return None


def _add_speedups(rows: list[dict]) -> None:
    liger = {(r["T"], r["layout"], r["positions"]): r for r in rows if r["impl"] == "liger" and "fwd_s" in r}
    for r in rows:
        ref = liger.get((r["T"], r["layout"], r["positions"]))
        if ref and "fwd_s" in r:
            r["speedup_vs_liger_fwd"] = ref["fwd_s"] / r["fwd_s"]
            r["speedup_vs_liger_fwd_bwd"] = ref["fwd_bwd_s"] / r["fwd_bwd_s"]


def _cuda_table(result: dict) -> list[str]:
    s = result["shape"]
    table = [f"# RoPE on {result['device']} (peak {result['peak_bytes_per_s'] / 1e12:.2f} TB/s: "
             f"{result['peak_source']}; L2 {result['l2_bytes'] or 0:,} B)", "",
             f"B={s['B']}, Hq={s['Hq']}, Hk={s['Hk']}, D={s['D']}, {s['dtype']}, (B, H, T, D) views of (B, T, H, D) "
             "storage; torch " + result["torch"] + ", triton " + result["triton"] + f", liger {result['liger']}. "
             "Median times (do_bench, L2 flushed between calls); fwd+bwd is ONE timed op (forward, then "
             "autograd.grad). Bytes per pass = read + write of q and k + cos/sin rows (+ ids); fwd+bwd counts two "
             "passes. Liger: half layout only, rotates in place, tables gathered to (1|B, T, D) beforehand. "
             "err = max |error| vs the float32-math reference (forward / gradient), checked against tol."
             + (f" Liger unavailable: {result['liger_error']}" if result["liger_error"] else ""), "",
             "| T | layout | positions | impl | fwd us | fwd % peak | fwd+bwd us | fwd+bwd % peak | x Liger fwd | "
             "x Liger fwd+bwd | err fwd / grad (tol) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        head = f"| {r['T']} | {r['layout']} | {r['positions']} | {r['impl']} |"
        if "fwd_bwd_s" not in r:
            table.append(f"{head} error: {r.get('error', '?')[:90]} |||||||")
            continue
        vs = lambda key: f"{r[key]:.2f}" if key in r else "-"  # noqa: E731
        flag = "" if r["ok"] else " **FAIL**"
        table.append(f"{head} {r['fwd_s'] * 1e6:.1f} | {r['fwd_frac_peak']:.0%} | {r['fwd_bwd_s'] * 1e6:.1f} | "
                     f"{r['fwd_bwd_frac_peak']:.0%} | {vs('speedup_vs_liger_fwd')} | "
                     f"{vs('speedup_vs_liger_fwd_bwd')} | "
                     f"{r['max_abs_err']:.2g} / {r['max_abs_grad_err']:.2g} ({r['tolerance']:.2g}){flag} |")
    if not result.get("complete", True):
        table += ["", "(partial: the run's time budget ended before every case was measured)"]
    return table


def bench_determinism(args) -> None:
    """sha256 of outputs and gradients over repeated calls on a large shape; all must agree."""
    import torch

    from sweeper.kernels import apply_rope, rope_cache

    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    cos, sin = rope_cache(8192, 128, device=dev)
    result = {"mode": "determinism", "device": torch.cuda.get_device_name(0), "cases": {}}
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        q = torch.randn(2, 4096, 32, 128, device=dev, generator=g).to(dtype).requires_grad_()
        k = torch.randn(2, 4096, 8, 128, device=dev, generator=g).to(dtype).requires_grad_()
        gq, gk = torch.randn_like(q), torch.randn_like(k)
        ids = torch.randint(0, 8192, (2, 4096), device=dev, generator=g)
        hashes = set()
        for _ in range(args.repeats):
            outs = apply_rope(q, k, cos, sin, positions=ids, impl="triton")
            grads = torch.autograd.grad(outs, (q, k), (gq, gk))
            h = hashlib.sha256()
            for t in (*outs, *grads):
                h.update(t.detach().contiguous().view(torch.uint8).cpu().numpy().tobytes())
            hashes.add(h.hexdigest())
        result["cases"][str(dtype)] = sorted(hashes)
    result["deterministic_in_process"] = all(len(v) == 1 for v in result["cases"].values())
    table = [f"# RoPE determinism on {result['device']} ({args.repeats} repeats)", ""] + [
        f"- {k}: {len(v)} distinct hash(es): {v[0][:16]}" for k, v in result["cases"].items()]
    publish(args.out, f"determinism_{args.tag}", result, table)
    if not result["deterministic_in_process"]:
        raise SystemExit("NOT deterministic: repeated calls gave different bits")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=("cpu", "cuda", "determinism"))
    p.add_argument("--out", default=os.environ.get("OUT", "bench_results"), help="results directory")
    p.add_argument("--steps", type=int, default=60, help="cpu: timed training steps per variant")
    p.add_argument("--threads", type=int, default=1, help="cpu: torch threads (the launcher gives runs 1)")
    p.add_argument("--max-t", type=int, default=None, help="cuda: longest sequence length (default: the T whose "
                   "q + k exceed the L2 cache 4x)")
    p.add_argument("--rep", type=int, default=40, help="cuda: do_bench repetition time (ms)")
    p.add_argument("--budget-s", type=float, default=150, help="cuda: stop starting new measurements after this")
    p.add_argument("--smoke", action="store_true", help="cuda: tiny shapes; without a GPU runs on CPU "
                   "under TRITON_INTERPRET=1 to check the script itself")
    p.add_argument("--repeats", type=int, default=5, help="determinism: calls to compare")
    p.add_argument("--tag", default="run", help="determinism: results file suffix")
    args = p.parse_args(argv)
    if args.steps < 1 or (args.max_t is not None and args.max_t < 1024) or args.repeats < 2:
        p.error("--steps must be >= 1, --max-t >= 1024 and --repeats >= 2")
    {"cpu": bench_cpu, "cuda": bench_cuda, "determinism": bench_determinism}[args.mode](args)


if __name__ == "__main__":
    main()
