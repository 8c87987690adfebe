"""Live watches on memory (the LiveMonitor owns and calls them; the checklist's `total_loss += loss` mistake).

    graph = GraphWatch(th);  graph.plant(step, loss);  graph.at_interval(step);  graph.result()   # graph_retained
    mem = MemoryWatch(th, total_steps, cuda_device);  mem.sample(step);  mem.result()            # memory

graph_retained  on interval steps a sentinel object is hung on the loss tensor's autograd node (a no-op hook,
                `loss.grad_fn.register_hook`); only that node holds it, so a weak reference to it dies exactly when
                the node is freed. A node alive `graph_retained_steps` steps later (two or more of them) is being
                kept by the user's code: `total_loss += loss` instead of `loss.item()`, a list of loss tensors. Each
                step's graph then stays in memory (the whole graph with its activations where no backward freed
                them, e.g. an evaluation loop without torch.no_grad). Costs one hook per interval, no sync. Needs
                the loss tensor itself (a float loss: skip).
memory          the C heap in use (glibc mallinfo2: where CPU tensors live; RSS from /proc/self/statm where that
                is missing) and, for a CUDA model, torch.cuda.memory_allocated, sampled every interval. Steady growth
                (first vs last quarter of the run after a 10% warm-up, growing in both
                halves, by more than max(mem_growth_warn_mb, mem_growth_warn_fraction x the early level)) is a
                warning naming the slope and, with total_steps, the memory the run will need by its end. The peak
                RSS (getrusage, the summary's peak_rss_mb) is judged against the memory limit (cgroup, else
                physical memory): above mem_peak_warn_fraction it warns.
"""
from __future__ import annotations

import os
import sys
import weakref
from typing import Any

from sweeper.health.live.curves import Curve
from sweeper.health.result import CheckResult
from sweeper.health.thresholds import Thresholds


class _Sentinel:
    __slots__ = ("__weakref__",)


class GraphWatch:
    def __init__(self, th: Thresholds, keep: int = 8):
        self.th, self.keep = th, keep
        self.live: list[tuple[int, Any]] = []        # (step planted, weakref to its sentinel)
        self.planted = 0
        self.found: dict[str, Any] | None = None

    def plant(self, step: int, loss: Any) -> None:
        node = getattr(loss, "grad_fn", None)
        if node is None or len(self.live) >= self.keep:
            return
        token = _Sentinel()
        node.register_hook(lambda grad_inputs, grad_outputs, token=token: None)
        self.live.append((step, weakref.ref(token)))
        self.planted += 1

    def at_interval(self, step: int) -> str | None:
        self.live = [(s, r) for s, r in self.live if r() is not None]
        old = [s for s, _ in self.live if step - s >= self.th.graph_retained_steps]
        if len(self.live) >= 2 and old and self.found is None:
            self.found = {"step": step, "oldest": min(old), "alive": [s for s, _ in self.live]}
            return self._message()
        return None

    def _message(self) -> str:
        f = self.found
        return (f"the autograd graph of the loss of step {f['oldest']} is still alive at step {f['step']} (with "
                f"those of steps {', '.join(map(str, f['alive'][1:6]))}): something keeps the loss tensors across "
                f"steps - `total_loss += loss` instead of `total_loss += loss.item()`, or a list of loss tensors - "
                f"so every step's graph stays in memory and memory grows every step. Fix: accumulate loss.item() "
                f"(or loss.detach())")

    def result(self) -> CheckResult:
        name = "graph_retained"
        expected = f"each loss's graph freed within {self.th.graph_retained_steps} steps"
        if self.found is not None:
            return CheckResult(name, "warn", self.found["step"] - self.found["oldest"], expected, self._message(),
                               {**self.found, "diagnosis": "memory_growth"})
        if not self.planted:
            return CheckResult(name, "skip", None, expected,
                               "not run: the monitor was given no loss tensor with a graph (pass the loss tensor, "
                               "not loss.item(), to after_backward / observe_loss)")
        return CheckResult(name, "pass", 0, expected, f"{self.planted} watched loss graphs were freed in time")

    def state_dict(self) -> dict[str, Any]:
        return {"found": self.found, "planted": self.planted}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.found, self.planted = state.get("found"), state.get("planted", 0)


def rss_mb() -> float | None:
    """This process's resident memory now, in MiB (Linux /proc; None elsewhere)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return None


_MALLINFO: Any = None


def heap_mb() -> float | None:
    """Bytes the C heap holds in use now, in MiB (glibc mallinfo2: small blocks + mmapped large ones, which is where
    CPU tensors live): unlike RSS it falls when memory is freed and rises when freed pages are reused, so growth
    shows even in a process whose RSS was raised earlier. None without glibc >= 2.33."""
    global _MALLINFO
    if _MALLINFO is None:
        try:
            import ctypes  # optional: mallinfo2 is glibc's (2.33+); loaded on the first reading only

            class Mallinfo2(ctypes.Structure):
                _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                                           "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
            fn = ctypes.CDLL(None).mallinfo2
            fn.restype = Mallinfo2
            _MALLINFO = fn
        except (OSError, AttributeError):
            _MALLINFO = False
    if not _MALLINFO:
        return None
    info = _MALLINFO()
    return (info.uordblks + info.hblkhd) / 2**20


def peak_rss_mb() -> float | None:
    try:
        import resource  # optional: the stdlib has it on Unix only
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


def memory_limit_mb() -> float | None:
    """The memory this process may use: the cgroup limit when there is one, else physical memory."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            raw = open(path).read().strip()
            if raw.isdigit() and int(raw) < 2**60:
                return int(raw) / 2**20
        except OSError:
            pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
    except (ValueError, OSError, AttributeError):
        return None


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 2] if len(s) % 2 else 0.5 * (s[len(s) // 2 - 1] + s[len(s) // 2])


class MemoryWatch:
    def __init__(self, th: Thresholds, total_steps: int | None = None, cuda_device: Any = None):
        self.th, self.total_steps, self.cuda_device = th, total_steps, cuda_device
        self.rss = Curve(th.curve_points)
        self.heap = Curve(th.curve_points)
        self.cuda = Curve(th.curve_points)
        self.found: dict[str, Any] | None = None

    def sample(self, step: int) -> str | None:
        r, h = rss_mb(), heap_mb()
        if r is not None:
            self.rss.add(step, r)
        if h is not None:
            self.heap.add(step, h)
        if self.cuda_device is not None:
            import torch  # deferred: torch (about 2 s to import), only when this runs

            self.cuda.add(step, torch.cuda.memory_allocated(self.cuda_device) / 2**20)
        if self.found is None:
            host = (("heap memory in use", self.heap),) if len(self.heap) else (("resident memory (RSS)", self.rss),)
            for what, curve in host + (("CUDA memory allocated", self.cuda),):
                growth = self._growth(curve)
                if growth is not None:
                    self.found = {"what": what, **growth}
                    return self._message()
        return None

    def _growth(self, curve: Curve) -> dict[str, Any] | None:
        pts = curve.points()
        pts = pts[len(pts) // 10:]                         # warm-up: optimizer state, allocator pools, caches
        if len(pts) < 8:
            return None
        q = len(pts) // 4
        quarters = [_median([v for _, v in pts[i * q:(i + 1) * q]]) for i in range(3)] + [
            _median([v for _, v in pts[3 * q:]])]
        early, late = quarters[0], quarters[3]
        grew = late - early
        if not (quarters[1] > early and late > quarters[2] and
                grew > max(self.th.mem_growth_warn_mb, self.th.mem_growth_warn_fraction * early)):
            return None
        steps = [s for s, _ in pts]
        mean_s, mean_v = sum(steps) / len(steps), sum(v for _, v in pts) / len(pts)
        var = sum((s - mean_s) ** 2 for s in steps)
        slope = sum((s - mean_s) * (v - mean_v) for s, v in pts) / var if var > 0 else 0.0   # MiB per step
        out = {"early_mb": early, "late_mb": late, "mb_per_1000_steps": slope * 1000, "step": pts[-1][0]}
        if self.total_steps:
            out["projected_mb"] = pts[-1][1] + slope * max(self.total_steps - pts[-1][0], 0)
        return out

    def _message(self) -> str:
        f = self.found
        projected = (f"; at this rate it reaches {f['projected_mb']:.0f} MiB by step {self.total_steps}"
                     if "projected_mb" in f else "")
        return (f"{f['what']} grows every step: {f['early_mb']:.0f} -> {f['late_mb']:.0f} MiB by step {f['step']} "
                f"({f['mb_per_1000_steps']:.1f} MiB per 1000 steps){projected}: tensors kept across steps - a "
                f"loss or output accumulated with its graph (`total += loss`, evaluation without torch.no_grad), "
                f"a list of tensors, a cache keyed by step. Fix: keep .item() / .detach() values")

    def result(self) -> CheckResult:
        name = "memory"
        peak, limit = peak_rss_mb(), memory_limit_mb()
        expected = (f"no steady growth; peak RSS < {self.th.mem_peak_warn_fraction:.0%} of "
                    f"{limit:.0f} MiB" if limit else "no steady growth")
        details: dict[str, Any] = {"peak_rss_mb": peak, "limit_mb": limit}
        if self.found is not None:
            return CheckResult(name, "warn", peak, expected, self._message(),
                               {**details, **self.found, "diagnosis": "memory_growth"})
        if peak is not None and limit and peak > self.th.mem_peak_warn_fraction * limit:
            return CheckResult(name, "warn", peak, expected,
                               f"peak resident memory {peak:.0f} MiB is {peak / limit:.0%} of the {limit:.0f} MiB this "
                               f"process may use: one more run on this machine, a bigger batch or any growth ends in "
                               f"an out-of-memory kill. Fix: smaller batches or fewer runs per machine", details)
        if peak is None:
            return CheckResult(name, "skip", None, expected, "peak memory not measurable on this platform", details)
        return CheckResult(name, "pass", peak, expected,
                           f"peak RSS {peak:.0f} MiB" + (f" ({peak / limit:.0%} of {limit:.0f} MiB)" if limit else "")
                           + "; no steady growth", details)

    def state_dict(self) -> dict[str, Any]:
        """Nothing: memory is the process's, not the run's. A resumed run is a new process that watches its own
        memory from its first step (its readings would not continue the old curve), and a checkpoint holds only
        what makes the resumed run bitwise the run that never stopped."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None
