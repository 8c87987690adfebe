"""RoPE benchmarks, measured side by side in one run.

    python benchmarks/bench_rope.py cpu  [--out DIR] [--steps 60] [--threads 1]
        RoPE's share of a training step of the default model (train/ ModelConfig, B=32) on CPU, against the
        same model without positional encoding (NoPE) and with the reference (torch.cat) rotation.
    python benchmarks/bench_rope.py cuda --out DIR [--max-t 8192]
        Forward and forward+backward time and achieved bandwidth (fraction of the device's peak) for
        Llama-like shapes (Hq=32, Hk=8, D=128, bf16): our Triton kernel, the eager reference, torch.compile of
        the reference, our fast PyTorch path and Liger-Kernel's RoPE (if it imports); plus a tile sweep.
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


def publish(out_dir: str, mode: str, result: dict, table: list[str]) -> None:
    """Atomically write bench_rope_<mode>.json and .md into out_dir; print the table."""
    write_results(out_dir, f"bench_rope_{mode}", result, table)
    print("\n".join(table))


# ----------------------------------------------------------------------------------------------- CPU
def bench_cpu(args) -> None:
    import torch

    from kernels import apply_rope, rope_cache
    from train.config import ModelConfig, TrainConfig
    from train.model import Transformer

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


def bench_cuda(args) -> None:
    import torch
    import triton
    from triton.testing import do_bench, do_bench_cudagraph

    from kernels import apply_rope, rope_cache, rope_reference
    from kernels.reference import _rotate as reference_rotate
    from kernels.rope_triton import LaunchConfig, choose_config, launch_rope

    if not torch.cuda.is_available() and not args.smoke:
        raise SystemExit("cuda mode needs a CUDA GPU (--smoke runs the same code on CPU, tiny shapes)")
    smoke_cpu = not torch.cuda.is_available()   # --smoke without a GPU: Triton interpreter, wall-clock timer
    dev = torch.device("cpu" if smoke_cpu else "cuda")
    name = "CPU smoke run (timings meaningless)" if smoke_cpu else torch.cuda.get_device_name(0)
    peak, peak_src = (1e10, "placeholder") if smoke_cpu else peak_bandwidth(torch)

    def bench(fn) -> float:
        if smoke_cpu:
            samples = []
            for _ in range(3):
                t0 = time.perf_counter()
                fn()
                samples.append(time.perf_counter() - t0)
            return statistics.median(samples)
        return do_bench(fn, warmup=25, rep=args.rep, return_mode="median") * 1e-3

    def bench_graph(fn) -> float | None:
        if smoke_cpu:
            return None
        return do_bench_cudagraph(fn, rep=args.rep, return_mode="median") * 1e-3

    big = torch.empty(1 << (16 if smoke_cpu else 28), dtype=torch.uint8, device=dev)            # 256 MiB copy
    copy_bw = 2 * big.numel() / bench(big.clone)
    del big
    try:
        from liger_kernel.ops.rope import LigerRopeFunction
        liger_error = None
    except Exception as e:  # noqa: BLE001 - report why it is missing, keep going
        LigerRopeFunction, liger_error = None, f"{type(e).__name__}: {e}"

    def ref_math(q, k, c, s):   # the reference's rotation (fp32 math), tables pre-sliced, no host checks
        c4, s4 = c[None, None], s[None, None]                                   # (1, 1, T, R/2)
        return tuple(reference_rotate(x.float(), c4, s4, False).to(x.dtype) for x in (q, k))
    ref_compiled = torch.compile(ref_math, dynamic=False, backend="aot_eager" if smoke_cpu else "inductor")
    Hq, Hk, D, B = (4, 2, 32, 1) if args.smoke else (32, 8, 128, 1)
    dtype = torch.float16 if smoke_cpu else torch.bfloat16     # the interpreter gets bf16 wrong
    cos, sin = rope_cache(args.max_t, D, device=dev)
    rows, sweep = [], []
    seqlens = [64, 128] if args.smoke else [t for t in (1024, 2048, 4096, 8192, 16384, 32768) if t <= args.max_t]
    for T in seqlens:
        g = torch.Generator(device=dev).manual_seed(T)
        # HF/Llama style: projections are (B, T, H, D); attention sees (B, H, T, D) transpose views
        q = torch.randn(B, T, Hq, D, device=dev, generator=g).to(dtype).transpose(1, 2)
        k = torch.randn(B, T, Hk, D, device=dev, generator=g).to(dtype).transpose(1, 2)
        gq, gk = torch.randn_like(q), torch.randn_like(k)
        bytes_pass = 2 * (q.numel() + k.numel()) * q.element_size() + 2 * T * (D // 2) * 4  # r+w, cos/sin rows
        c, s = cos[:T], sin[:T]
        impls = {
            "triton (ours)": lambda q, k: apply_rope(q, k, cos, sin, format="bhtd", impl="triton"),
            "torch path (ours)": lambda q, k: apply_rope(q, k, cos, sin, format="bhtd", impl="torch"),
            "reference eager": lambda q, k: ref_math(q, k, c, s),
            "reference torch.compile": lambda q, k: ref_compiled(q, k, c, s),
        }
        if LigerRopeFunction is not None:   # HF-style full-width tables; rotates its inputs IN PLACE
            c_full, s_full = torch.cat((c, c), -1), torch.cat((s, s), -1)
            impls["liger"] = lambda q, k: LigerRopeFunction.apply(q, k, c_full, s_full)
        want = rope_reference(q, k, cos, sin, None, "half", "bhtd")
        for label, fn in impls.items():
            in_place = label == "liger"
            try:
                got = fn(q.clone(), k.clone())
                err = max((a.float() - b.float()).abs().max().item() for a, b in zip(got, want))
                qs, ks = q.clone(), k.clone()          # scratch inputs (Liger keeps rotating them: fine for time)
                t_fwd = bench(lambda: fn(qs, ks))
                try:    # device time without host overhead (CUDA graph replay; no L2 flush between calls)
                    t_graph = bench_graph(lambda: fn(qs, ks))
                except Exception:  # noqa: BLE001 - not every competitor is capturable
                    t_graph = None
                ql, kl = q.detach().clone().requires_grad_(), k.detach().clone().requires_grad_()
                gql, gkl = gq.clone(), gk.clone()     # Liger's backward rotates the incoming grads in place
                if in_place:   # an in-place op needs non-leaf inputs: time `x * 1` around it, then subtract
                    t_fb = bench(lambda: torch.autograd.grad(fn(ql * 1, kl * 1), (ql, kl), (gql, gkl)))
                    t_fb -= bench(lambda: torch.autograd.grad((ql * 1, kl * 1), (ql, kl), (gql, gkl)))
                else:
                    t_fb = bench(lambda: torch.autograd.grad(fn(ql, kl), (ql, kl), (gql, gkl)))
                rows.append({"T": T, "impl": label, "fwd_s": t_fwd, "fwd_bwd_s": t_fb, "max_abs_err": err,
                             "fwd_graph_s": t_graph, "fwd_frac_peak": bytes_pass / t_fwd / peak,
                             "fwd_graph_frac_peak": bytes_pass / t_graph / peak if t_graph else None,
                             "fwd_bwd_frac_peak": 2 * bytes_pass / t_fb / peak})
            except Exception as e:  # noqa: BLE001 - one failing competitor must not hide the others
                rows.append({"T": T, "impl": label, "error": f"{type(e).__name__}: {e}"[:300]})
    # tile sweep of the raw kernel (no host checks) at the longest T, to tune choose_config() on this device
    qo, ko = torch.empty_like(q), torch.empty_like(k)
    qv, kv, qov, kov = (x.transpose(1, 2) for x in (q, k, qo, ko))
    heur = choose_config(B * T, Hq, Hk, D)
    grid = [LaunchConfig(bt, bh, w) for bt in (1, 2, 4, 8) for bh in (4, 8, 16, 32) for w in (2, 4, 8)
            if bt * bh * D <= 16384]
    for cfg in sorted({heur, *(grid[:2] if smoke_cpu else grid)}, key=str):
        t = bench(lambda: launch_rope(qv, kv, cos, sin, qov, kov, config=cfg))
        sweep.append({"T": T, "block_t": cfg.block_t, "block_h": cfg.block_h, "num_warps": cfg.num_warps,
                      "heuristic": cfg == heur, "fwd_s": t, "fwd_frac_peak": bytes_pass / t / peak})
    ok = [r for r in rows if "error" not in r]
    liger = {r["T"]: r for r in ok if r["impl"] == "liger"}
    for r in ok:
        if r["T"] in liger:
            r["speedup_vs_liger_fwd"] = liger[r["T"]]["fwd_s"] / r["fwd_s"]
            r["speedup_vs_liger_fwd_bwd"] = liger[r["T"]]["fwd_bwd_s"] / r["fwd_bwd_s"]
    result = {"mode": "cuda", "device": name, "peak_bytes_per_s": peak, "peak_source": peak_src,
              "measured_copy_bytes_per_s": copy_bw, "torch": torch.__version__, "triton": triton.__version__,
              "shape": {"B": B, "Hq": Hq, "Hk": Hk, "D": D, "dtype": str(dtype), "format": "bhtd views"},
              "liger_error": liger_error, "rows": rows, "tile_sweep": sweep}
    table = [f"# RoPE on {name} (peak {peak / 1e12:.2f} TB/s: {peak_src}; clone() reaches "
             f"{copy_bw / peak:.0%})", "",
             f"B={B}, Hq={Hq}, Hk={Hk}, D={D}, {dtype}, (B, H, T, D) views of (B, T, H, D) storage; median times "
             "(do_bench flushes L2 between calls; 'graph' = CUDA-graph replay, no host overhead, warm L2). "
             "Bytes per pass = read + write of q and k + cos/sin rows; fwd+bwd counts two passes. Liger rotates in "
             "place (its fwd+bwd time excludes the `x * 1` that makes its inputs non-leaf)."
             + (f" Liger unavailable: {liger_error}" if liger_error else ""), "",
             "| T | impl | fwd us | fwd % peak | fwd graph % peak | fwd+bwd us | fwd+bwd % peak | x Liger fwd | "
             "x Liger fwd+bwd | max err |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            table.append(f"| {r['T']} | {r['impl']} | error: {r['error'][:80]} ||||||||")
            continue
        vs = lambda key: f"{r[key]:.2f}" if key in r else "-"  # noqa: E731
        graph = f"{r['fwd_graph_frac_peak']:.0%}" if r["fwd_graph_frac_peak"] else "-"
        table.append(f"| {r['T']} | {r['impl']} | {r['fwd_s'] * 1e6:.1f} | {r['fwd_frac_peak']:.0%} | {graph} | "
                     f"{r['fwd_bwd_s'] * 1e6:.1f} | {r['fwd_bwd_frac_peak']:.0%} | {vs('speedup_vs_liger_fwd')} | "
                     f"{vs('speedup_vs_liger_fwd_bwd')} | {r['max_abs_err']:.2g} |")
    best = min(sweep, key=lambda s: s["fwd_s"])
    heur_row = next(s for s in sweep if s["heuristic"])
    table += ["", f"Tile sweep at T={seqlens[-1]}: heuristic {heur_row['block_t']}x{heur_row['block_h']} "
              f"w{heur_row['num_warps']} {heur_row['fwd_frac_peak']:.0%} of peak; best {best['block_t']}x"
              f"{best['block_h']} w{best['num_warps']} {best['fwd_frac_peak']:.0%}."]
    publish(args.out, "cuda", result, table)


def bench_determinism(args) -> None:
    """sha256 of outputs and gradients over repeated calls on a large shape; all must agree."""
    import torch

    from kernels import apply_rope, rope_cache

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
    p.add_argument("--max-t", type=int, default=8192, help="cuda: longest sequence length")
    p.add_argument("--rep", type=int, default=100, help="cuda: do_bench repetition time (ms)")
    p.add_argument("--smoke", action="store_true", help="cuda: tiny shapes; without a GPU runs on CPU "
                   "under TRITON_INTERPRET=1 to check the script itself")
    p.add_argument("--repeats", type=int, default=5, help="determinism: calls to compare")
    p.add_argument("--tag", default="run", help="determinism: results file suffix")
    args = p.parse_args(argv)
    if args.steps < 1 or args.max_t < 1024 or args.repeats < 2:
        p.error("--steps must be >= 1, --max-t >= 1024 and --repeats >= 2")
    {"cpu": bench_cpu, "cuda": bench_cuda, "determinism": bench_determinism}[args.mode](args)


if __name__ == "__main__":
    main()
