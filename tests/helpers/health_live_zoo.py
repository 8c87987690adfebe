"""The live bug zoo (issue 29): whole training runs, each with ONE bug the live monitor and the run's diagnosis must
name, beside a healthy twin that differs only in the bug. Sizes and data vary with the seed.

    from tests.helpers.health_live_zoo import CASES, train
    setup = CASES["forgot_zero_grad_sgd_momentum"].build(bug=True, seed=0)
    monitor = setup.monitor()
    record = train(setup, monitor)       # record: per-step losses, grad norms, lrs, val points, extras
    monitor.report()                     # the case's `caught_by` check carries its `says`; report.diagnosis

Every case also names `proof(record, setup)`: an independent measurement that the bug is real (gradients that grow,
an lr that hits zero at 10% of the run, a val loss that rises...), asserted by tests/test_health_live_zoo.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from sweeper.health import LiveMonitor


# ---- data ------------------------------------------------------------------------------------------------------
def teacher_data(n: int, features: int, classes: int, seed: int, linear: bool = False):
    """x (n, F) standard normal, y (n,) balanced classes: a fixed random 2-layer teacher's score (linear: a random
    projection) cut at its quantiles (on a fixed reference sample), so chance is 1/C."""
    t = torch.Generator().manual_seed(1234)
    w1, w2 = torch.randn(features, 32, generator=t), torch.randn(32, generator=t)

    def score(x):
        return x @ w1[:, 0] if linear else torch.tanh(x @ w1) @ w2        # (n,)
    cuts = torch.quantile(score(torch.randn(20000, features, generator=t)), torch.linspace(0, 1, classes + 1)[1:-1])
    x = torch.randn(n, features, generator=torch.Generator().manual_seed(seed))
    return x, torch.bucketize(score(x), cuts)


def xor_data(n: int, seed: int, noise_dims: int = 2):
    """Two classes by the sign of x0 * x1 (not linearly separable), plus noise features."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2 + noise_dims, generator=g)
    return x, ((x[:, 0] * x[:, 1]) > 0).long()


# ---- models ----------------------------------------------------------------------------------------------------
class MLP(nn.Module):
    def __init__(self, features: int, width: int, classes: int, act: bool = True, zero_head: bool = False):
        super().__init__()
        self.fc1, self.fc2, self.head = nn.Linear(features, width), nn.Linear(width, width), nn.Linear(width, classes)
        self.act = act
        if zero_head:
            nn.init.zeros_(self.head.weight)
            nn.init.zeros_(self.head.bias)

    def forward(self, x):                                                  # (B, F) -> (B, C)
        f = F.relu if self.act else (lambda h: h)
        return self.head(f(self.fc2(f(self.fc1(x)))))


class TanhMLP(nn.Module):
    def __init__(self, features: int, width: int, classes: int):
        super().__init__()
        self.fc1, self.head = nn.Linear(features, width), nn.Linear(width, classes)

    def forward(self, x):                                                  # (B, F) -> (B, C)
        return self.head(torch.tanh(self.fc1(x)))


class LazyProj(nn.Module):
    """An MLP whose projection is built lazily in forward. bug: rebuilt on every call (the optimizer, built after
    the first forward, keeps the first one; the model trains with a fresh, never-updated one each step)."""

    def __init__(self, features: int, width: int, classes: int, rebuild: bool):
        super().__init__()
        self.inp, self.head = nn.Linear(features, width), nn.Linear(width, classes)
        self.proj: nn.Linear | None = None
        self.rebuild, self.width = rebuild, width

    def forward(self, x):
        if self.proj is None or self.rebuild:
            self.proj = nn.Linear(self.width, self.width)
        return self.head(F.relu(self.proj(F.relu(self.inp(x)))))


class _Gate(torch.autograd.Function):
    """x * w per feature, by hand. drop_w: the backward returns None for w (a custom op that forgets a gradient)."""

    @staticmethod
    def forward(ctx, x, w, drop_w: bool):
        ctx.save_for_backward(x, w)
        ctx.drop_w = drop_w
        return x * w                                                       # (B, W) * (W,)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, None if ctx.drop_w else (g * x).sum(0), None


class GatedMLP(MLP):
    """The MLP with a learned per-feature gate after fc1, applied by a custom autograd Function."""

    def __init__(self, features: int, width: int, classes: int, drop_w: bool):
        super().__init__(features, width, classes)
        self.gate = nn.Parameter(torch.ones(width))
        self.drop_w = drop_w

    def forward(self, x):                                                  # (B, F) -> (B, C)
        h = _Gate.apply(F.relu(self.fc1(x)), self.gate, self.drop_w)
        return self.head(F.relu(self.fc2(h)))


# ---- the setup and the loop ------------------------------------------------------------------------------------
@dataclass
class Setup:
    model: nn.Module
    make_optimizer: Callable[[Any], torch.optim.Optimizer]
    stream: Callable[[int], tuple[torch.Tensor, torch.Tensor]]             # step -> (x, y)
    steps: int
    num_classes: int
    interval: int = 10
    val: tuple[torch.Tensor, torch.Tensor] | None = None                   # evaluated every eval_every steps
    eval_every: int = 25
    make_scheduler: Callable[[Any], Any] | None = None
    forget_zero_grad: bool = False
    keep_graph: bool = False                                               # total_loss += loss (not .item())
    eval_keeps_graph: bool = False                                         # per-step eval without no_grad, summed
    spike_at: int | None = None                                            # a corrupted batch at this step
    warmup_forward: bool = False                                           # one forward before the optimizer
    extra: dict[str, Any] = field(default_factory=dict)

    def monitor(self, **kw) -> LiveMonitor:
        return LiveMonitor(self.model, interval=self.interval, num_classes=self.num_classes, **kw)


def evaluate(model: nn.Module, val) -> tuple[float, float]:
    x, y = val
    was = model.training
    model.eval()
    with torch.no_grad():
        logits = model(x)
        loss, acc = F.cross_entropy(logits, y).item(), (logits.argmax(-1) == y).float().mean().item()
    model.train(was)
    return loss, acc


def train(s: Setup, monitor: LiveMonitor | None = None, with_optimizer: bool = True) -> dict[str, Any]:
    """The textbook loop with the case's bug kept; the monitor is wired as the README says (loss tensor to
    after_backward, after_step, observe_eval). Returns what the proofs measure."""
    model = s.model
    if s.warmup_forward:
        model(s.stream(0)[0])                                              # materialise lazy layers
    opt = s.make_optimizer(model.parameters())
    sched = s.make_scheduler(opt) if s.make_scheduler else None
    if monitor is not None and with_optimizer:
        monitor.lr.optimizer = monitor.members.optimizer = opt
    rec: dict[str, Any] = {"loss": [], "grad_norm": [], "lr": [], "val": [], "optimizer": opt, "graph_nodes": []}
    total_loss: Any = 0.0
    val_total: Any = 0.0
    for step in range(s.steps):
        x, y = s.stream(step)
        if step == s.spike_at:
            x = x * 50.0                                                   # one corrupted batch
        if not s.forget_zero_grad:
            opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        rec["grad_norm"].append(math.sqrt(sum(float(p.grad.double().pow(2).sum())
                                              for p in model.parameters() if p.grad is not None)))
        rec["loss"].append(loss.item())
        if monitor is not None:
            monitor.after_backward(step, loss)
        rec["lr"].append(opt.param_groups[0]["lr"])
        opt.step()
        if monitor is not None:
            monitor.after_step(step)
        if sched is not None:
            sched.step()
        if s.keep_graph:
            total_loss = total_loss + loss                                 # the bug: the graph is kept
            if step % 50 == 49:
                rec["graph_nodes"].append((step, _graph_size(total_loss)))
        else:
            total_loss += loss.item()
        if s.eval_keeps_graph or s.extra.get("eval_no_grad"):
            vx, vy = s.val
            if s.eval_keeps_graph:
                val_total = val_total + F.cross_entropy(model(vx), vy)     # the bug: eval without no_grad
            else:
                with torch.no_grad():
                    val_total += F.cross_entropy(model(vx), vy).item()
            if step % 100 == 99 and s.eval_keeps_graph:
                rec.setdefault("saved_mb", []).append((step, _saved_bytes(val_total) / 2**20))
        if s.val is not None and (step + 1) % s.eval_every == 0:
            vl, va = evaluate(model, s.val)
            rec["val"].append((step + 1, vl, va))
            if monitor is not None:
                monitor.observe_eval(step + 1, val_loss=vl, val_acc=va)
    rec["total_loss"] = total_loss
    return rec


def _graph_size(t: torch.Tensor, limit: int = 100000) -> int:
    """Autograd nodes reachable from t (an independent count of what a kept graph holds)."""
    seen, stack = set(), [t.grad_fn]
    while stack and len(seen) < limit:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(n for n, _ in node.next_functions)
    return len(seen)


def _saved_bytes(t: torch.Tensor) -> int:
    """Bytes of the activations the autograd graph of t keeps alive (its nodes' saved tensors, each once)."""
    seen, stack, held = set(), [t.grad_fn], {}
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for attr in dir(node):
            if attr.startswith("_saved_"):
                try:
                    v = getattr(node, attr, None)
                except RuntimeError:        # a weight the optimizer updated in place since: not an activation
                    continue
                if torch.is_tensor(v):
                    held[v.data_ptr()] = v.numel() * v.element_size()
        stack.extend(n for n, _ in node.next_functions)
    return sum(held.values())


def _stream(x: torch.Tensor, y: torch.Tensor, batch: int, seed: int):
    """Minibatches in a fixed random order per epoch."""
    n = len(x)
    perms: dict[int, torch.Tensor] = {}

    def stream(step: int):
        epoch, i = divmod(step * batch, n)
        if epoch not in perms:
            perms[epoch] = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 1000 + epoch))
        idx = perms[epoch][i:i + batch]
        return x[idx], y[idx]
    return stream


# ---- cases -----------------------------------------------------------------------------------------------------
@dataclass
class Case:
    name: str
    caught_by: str                 # the check that must flag the bug
    status: str                    # ... with this status
    says: str                      # ... and this phrase of the cause
    diagnosis: str                 # the run's diagnosis
    build: Callable[[bool, int], Setup]
    proof: Callable[[dict, Setup], None]      # asserts the bug is real (on the bug's record)
    slow: bool = False


def _classifier(seed: int, n: int = 512, batch: int = 32, lr: float = 3e-3, opt: str = "adam", steps: int = 300,
                **kw) -> Setup:
    torch.manual_seed(seed)
    features, width, classes = 8 + 4 * seed, 32 + 32 * seed, 4 + seed
    x, y = teacher_data(n, features, classes, seed)
    model = MLP(features, width, classes, **kw.pop("model_kw", {}))
    make = (lambda p: torch.optim.SGD(p, lr=lr, momentum=kw.pop("momentum", 0.0))) if opt == "sgd" else \
        (lambda p: torch.optim.Adam(p, lr=lr))
    momentum = kw.pop("momentum", None)
    if opt == "sgd" and momentum is not None:
        make = lambda p: torch.optim.SGD(p, lr=lr, momentum=momentum)   # noqa: E731
    return Setup(model, make, _stream(x, y, batch, seed), steps, classes, **kw)


def _zero_grad(bug: bool, seed: int) -> Setup:
    return _classifier(seed, opt="sgd", lr=0.02, momentum=0.9, forget_zero_grad=bug)


def _prove_zero_grad(rec, s):
    g = rec["grad_norm"]
    assert sum(g[-20:]) / 20 > 5 * sum(g[:20]) / 20, "gradients do not grow"      # they add up step over step
    assert min(rec["loss"][:50]) < rec["loss"][0], "the loss never fell"          # silent at first


def _spike(bug: bool, seed: int) -> Setup:
    return _classifier(seed, spike_at=37 + seed if bug else None)


def _prove_spike(rec, s):
    g, k = rec["grad_norm"], s.spike_at
    assert (k + 1) % s.interval != 0, "the spike must fall between two interval steps"
    assert g[k] > 10 * sorted(g[k - 10:k])[5], g[k - 10:k + 1]


def _schedule(bug: bool, seed: int) -> Setup:
    s = _classifier(seed, steps=300)
    horizon = s.steps // 10 if bug else s.steps                  # bug: the horizon in epochs (10 per run), not steps
    if seed % 2 == 0:
        s.make_scheduler = lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda k: max(0.0, 1 - k / horizon))
    else:
        s.make_scheduler = lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=horizon)
    return s


def _prove_schedule(rec, s):
    lrs = rec["lr"]
    first_zero = next(i for i, lr in enumerate(lrs) if lr <= 1e-12)
    assert first_zero <= 0.1 * s.steps + 1, first_zero


def _replaced(bug: bool, seed: int) -> Setup:
    torch.manual_seed(seed)
    features, width, classes = 8 + 4 * seed, 32 + 16 * seed, 4
    x, y = teacher_data(512, features, classes, seed)
    model = LazyProj(features, width, classes, rebuild=bug)
    return Setup(model, lambda p: torch.optim.Adam(p, lr=3e-3), _stream(x, y, 32, seed), 120, classes,
                 warmup_forward=True)


def _prove_replaced(rec, s):
    held = {id(p) for g in rec["optimizer"].param_groups for p in g["params"]}
    assert id(s.model.proj.weight) not in held                 # the projection the model uses is never stepped
    assert any(id(p) not in {id(q) for q in s.model.parameters()} for g in rec["optimizer"].param_groups
               for p in g["params"])                           # and the optimizer steps one the model dropped


def _keeps_graph(bug: bool, seed: int) -> Setup:
    return _classifier(seed, steps=300, keep_graph=bug)


def _prove_graph(rec, s):
    sizes = [n for _, n in rec["graph_nodes"]]
    assert sizes[-1] > 3 * sizes[0], sizes                     # the kept graph grows every step


def _eval_graph(bug: bool, seed: int) -> Setup:
    torch.manual_seed(seed)
    features, classes = 64, 4
    x, y = teacher_data(512, features, classes, seed)
    val = teacher_data(512 + 128 * seed, features, classes, seed + 100)
    s = Setup(MLP(features, 256, classes), lambda p: torch.optim.Adam(p, lr=1e-3), _stream(x, y, 32, seed), 300,
              classes, val=val, eval_every=10**9, eval_keeps_graph=bug, extra={"eval_no_grad": not bug})
    return s


def _prove_eval_graph(rec, s):
    held = [mb for _, mb in rec["saved_mb"]]
    assert held[-1] > 2.5 * held[0] and held[-1] > 250, held   # the kept graphs hold ever more activations


def _lr_big(bug: bool, seed: int) -> Setup:
    torch.manual_seed(seed)
    features, width, classes = 8 + 4 * seed, 32 + 32 * seed, 4 + seed
    x, y = teacher_data(512, features, classes, seed)
    lr = 10.0 if bug else 0.3
    return Setup(TanhMLP(features, width, classes), lambda p: torch.optim.SGD(p, lr=lr), _stream(x, y, 32, seed), 300,
                 classes)


def _prove_lr_big(rec, s):
    assert max(rec["loss"]) > 3 * rec["loss"][0], max(rec["loss"])          # the loss blows up on the way


def _lr_kills(bug: bool, seed: int) -> Setup:
    s = _classifier(seed, opt="sgd", lr=3.0 if bug else 0.1, steps=300)
    s.extra["data"] = teacher_data(512, 8 + 4 * seed, 4 + seed, seed)
    return s


def _prove_lr_kills(rec, s):
    x, _ = s.extra["data"]
    with torch.no_grad():
        h1 = torch.relu(s.model.fc1(x))                                    # (n, width)
        h2 = torch.relu(s.model.fc2(h1))
    dead = max((h1 == 0).all(0).float().mean().item(), (h2 == 0).all(0).float().mean().item())
    assert dead >= 0.5, dead                        # half the ReLU units of a layer output 0 on every example


def _lr_small(bug: bool, seed: int) -> Setup:
    return _classifier(seed, opt="sgd", lr=1e-5 if bug else 0.1, steps=300)


def _prove_lr_small(rec, s):
    first, last = rec["loss"][0], sum(rec["loss"][-30:]) / 30
    assert first - last < 0.05 * first, (first, last)


def _linear(bug: bool, seed: int) -> Setup:
    torch.manual_seed(seed)
    x, y = xor_data(512, seed, noise_dims=2 + seed)
    return Setup(MLP(x.shape[1], 32 + 16 * seed, 2, act=not bug), lambda p: torch.optim.Adam(p, lr=1e-2),
                 _stream(x, y, 64, seed), 400, 2, extra={"data": (x, y)})


def _prove_linear(rec, s):
    x, y = s.extra["data"]
    with torch.no_grad():
        acc = (s.model(x).argmax(-1) == y).float().mean().item()
    assert acc < 0.65, acc                                     # a linear map cannot separate XOR quadrants


def _shuffled(bug: bool, seed: int) -> Setup:
    torch.manual_seed(seed)
    features, classes = 16, 4
    x, y = teacher_data(512, features, classes, seed, linear=True)
    if bug:
        y = y[torch.randperm(len(y), generator=torch.Generator().manual_seed(seed + 7))]   # labels shuffled apart
    val = teacher_data(512, features, classes, seed + 50, linear=True)
    return Setup(MLP(features, 256, classes), lambda p: torch.optim.AdamW(p, lr=3e-3, weight_decay=1.0),
                 _stream(x, y, 32, seed), 600, classes, val=val, eval_every=50, extra={"data": (x, y), "seed": seed})


def _prove_shuffled(rec, s):
    x, y = s.extra["data"]
    truth = teacher_data(len(x), x.shape[1], s.num_classes, s.extra["seed"], linear=True)[1]
    assert (truth == y).float().mean() < 1 / s.num_classes + 0.1          # the labels no longer match the inputs
    assert rec["loss"][-1] < 0.5 * math.log(s.num_classes)                # train falls by memorising ...
    late = sorted(a for _, _, a in rec["val"][len(rec["val"]) // 2:])
    assert late[len(late) // 2] < 1 / s.num_classes + 0.06                # ... val accuracy stays near chance


def _shifted(bug: bool, seed: int) -> Setup:
    torch.manual_seed(seed)
    features, classes = 12 + 4 * seed, 4
    x, y = teacher_data(2048, features, classes, seed, linear=True)
    vx, vy = teacher_data(512, features, classes, seed + 50, linear=True)
    if bug:                     # val built by another pipeline: the raw features, not standardised like train's
        vx = vx * 3.0 + 2.0
    return Setup(MLP(features, 64, classes), lambda p: torch.optim.Adam(p, lr=3e-3), _stream(x, y, 32, seed), 400,
                 classes, val=(vx, vy), eval_every=10)


def _prove_shifted(rec, s):
    train_end = sum(rec["loss"][-25:]) / 25
    assert rec["val"][-1][1] > 1.5 * train_end, (rec["val"][-1], train_end)     # val far above train ...
    fixed = ((s.val[0] - 2.0) / 3.0, s.val[1])                  # ... yet the same examples through train's pipeline
    assert evaluate(s.model, fixed)[0] < 1.5 * train_end + 0.1  # score about like train


def _overfit(bug: bool, seed: int) -> Setup:
    torch.manual_seed(seed)
    features, classes = 16, 4
    x, y = teacher_data(48 if bug else 4096, features, classes, seed)
    val = teacher_data(512, features, classes, seed + 50)
    return Setup(MLP(features, 256, classes), lambda p: torch.optim.Adam(p, lr=3e-3), _stream(x, y, 16, seed), 600,
                 classes, val=val, eval_every=25)


def _prove_overfit(rec, s):
    losses = [v for _, v, _ in rec["val"]]
    i = losses.index(min(losses))
    assert i < len(losses) - 2 and losses[-1] > 1.1 * losses[i], losses


def _custom_fn_none(bug: bool, seed: int) -> Setup:
    s = _classifier(seed)
    features, width, classes = 8 + 4 * seed, 32 + 32 * seed, 4 + seed
    torch.manual_seed(seed)
    s.model = GatedMLP(features, width, classes, drop_w=bug)
    s.extra["gate0"] = s.model.gate.detach().clone()
    return s


def _prove_custom_fn_none(rec, s):
    assert torch.equal(s.model.gate.detach(), s.extra["gate0"]), "the gate trained"   # never: no gradient


CASES = {c.name: c for c in [
    Case("forgot_zero_grad_sgd_momentum", "grad_accumulation", "fail", "optimizer.zero_grad() is missing",
         "zero_grad_missing", _zero_grad, _prove_zero_grad),
    Case("grad_spike_between_samples", "grad_spike", "warn", "largest at step", "healthy", _spike, _prove_spike),
    Case("lr_schedule_horizon_in_epochs", "lr_schedule", "fail", "train with no learning rate",
         "lr_schedule_ends_early", _schedule, _prove_schedule),
    Case("optimizer_holds_replaced_parameter", "optimizer_params", "fail", "the model replaced those parameters",
         "params_not_trained", _replaced, _prove_replaced),
    Case("total_loss_keeps_the_graph", "graph_retained", "warn", "total_loss += loss", "memory_growth",
         _keeps_graph, _prove_graph),
    Case("eval_without_no_grad_grows_memory", "memory", "warn", "grows every step", "memory_growth", _eval_graph,
         _prove_eval_graph, slow=True),
    Case("lr_too_big_loss_blows_up", "train_trend", "warn", "learning rate too big", "lr_too_big", _lr_big,
         _prove_lr_big),
    Case("lr_too_big_kills_relu_units", "zero_grad_share", "warn", "dead units", "lr_too_big", _lr_kills,
         _prove_lr_kills),
    Case("lr_too_small", "train_trend", "warn", "learning rate too small", "lr_too_small", _lr_small,
         _prove_lr_small),
    Case("linear_model_on_xor", "train_trend", "warn", "affine in its inputs", "model_too_small", _linear,
         _prove_linear),
    Case("labels_shuffled_apart_from_inputs", "val_at_chance", "fail", "labels that do not match their inputs",
         "labels_do_not_match_inputs", _shuffled, _prove_shuffled),
    Case("val_from_another_distribution", "val_shift", "fail", "different distributions", "leak_or_shift",
         _shifted, _prove_shifted),
    Case("custom_function_returns_none_grad", "gradient_flow", "fail", "the loss never reaches them",
         "dead_gradients", _custom_fn_none, _prove_custom_fn_none),
    Case("overfitting_a_small_train_set", "overfitting", "warn", "overfitting from step", "overfitting", _overfit,
         _prove_overfit),
]}
