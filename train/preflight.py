"""Health preflight of the built-in trainer: the model, batch, optimizer, step and RoPE reference toggle of a run.

    from sweeper.train.preflight import preflight_config
    report = preflight_config(run.config_dict)     # the `sweeper.train.preflight:preflight_config` hook
    report["gradient_flow"].message   # "... blocks.0.attn.q_proj.weight: gradient exactly zero ..."

`preflight_config` is what a sweep with sweeper.preflight=warn|stop calls once per variant before its seeds
launch; `preflight_model` is what train/loop.py hands to run.health(preflight=...) at the start of a fresh
run (`health.preflight: true`). Everything is built with the trainer's own builders (corpus, Transformer, seed
streams, learning-rate schedule), so the checks see the model the run trains. The caller's RNG is untouched.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import torch

from sweeper.health.result import HealthReport
from sweeper.health.runner import preflight
from sweeper.health.thresholds import DEFAULT_THRESHOLDS, Thresholds
from sweeper.run.streams import SeedStreams
from sweeper.train.batches import windows
from sweeper.train.config import RunConfig
from sweeper.train.corpus import load_corpus
from sweeper.train.model import Transformer
from sweeper.train.optim import lr_at, make_optimizer, pick_device


def preflight_config(config: Mapping[str, Any] | RunConfig, thresholds: Thresholds | None = None,
                     skip: Iterable[str] = ()) -> HealthReport:
    """Build the run's model at its init seed and its first training windows, then run preflight on them.
    thresholds: default the config's health.thresholds over the defaults."""
    cfg = config if isinstance(config, RunConfig) else RunConfig.from_dict(dict(config))
    thresholds = thresholds or Thresholds.from_dict(cfg.health.thresholds)
    corpus = load_corpus(cfg.data)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SeedStreams(cfg.seed).seed_for("init"))         # the run's own init
        model = Transformer(cfg.model, corpus.vocab_size).to(pick_device(cfg))
    return preflight_model(cfg, model, corpus, thresholds, skip)


def preflight_model(cfg: RunConfig, model: torch.nn.Module, corpus: Any,
                    thresholds: Thresholds = DEFAULT_THRESHOLDS, skip: Iterable[str] = ()) -> HealthReport:
    """preflight() on a built Transformer of `cfg` with the run's optimizer and step.

    The batch is the first batch_size training windows, read without touching the run's data order or RNG; the
    validation data the first batch_size validation windows, with the loop's evaluation on them."""
    device = next(model.parameters()).device
    T, B = cfg.model.context, cfg.train.batch_size
    starts = torch.arange(min(B, (len(corpus.train) - 1) // T)) * T                 # (B,)
    x, y = windows(corpus.train, starts, T)                                          # (B, T) each

    def optimizer_factory(params):
        return make_optimizer(params, cfg)          # the loop's own AdamW

    updates: dict[int, int] = {}

    def train_step(model, batch, optimizer):
        """The loop's step: warmup as scheduled, zero_grad, backward, clipping, update. The decay is left out: a
        short run's schedule would otherwise starve a 150-step overfit test."""
        inputs, targets = batch
        n = updates.get(id(optimizer), 0)
        updates[id(optimizer)] = n + 1
        for group in optimizer.param_groups:   # the run's warmup, then its peak rate: the check asks whether
            group["lr"] = lr_at(n, cfg) if n < cfg.train.warmup_steps else cfg.train.lr   # the model fits at it
        _, loss = model(inputs, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.grad_clip or float("inf"))
        optimizer.step()
        return loss.detach()

    def loss_fn(outputs, targets):
        logits = outputs[0] if isinstance(outputs, tuple) else outputs                # (B, T, V)
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())

    vstarts = torch.arange(min(B, (len(corpus.val) - 1) // T)) * T                  # (B,) first validation windows
    xv, yv = (t.to(device) for t in windows(corpus.val, vstarts, T))               # (B, T) each

    @torch.no_grad()
    def evaluate(model):
        """The loop's evaluation (Trainer.evaluate) on the first validation windows."""
        model.eval()
        loss = model(xv, yv)[1].item()
        model.train()
        return loss

    return preflight(model, loss_fn, (x.to(device), y.to(device)), optimizer_factory=optimizer_factory,
                     num_classes=corpus.vocab_size, sequence_dim=1, train_step=train_step,
                     use_reference=rope_reference_toggle(model, cfg.model.rope_impl), thresholds=thresholds,
                     seed=cfg.seed, skip=skip, val_data=(xv, yv), evaluate=evaluate)


def rope_reference_toggle(model: torch.nn.Module, configured_impl: str):
    """use_reference(True) puts every attention layer on kernels' reference RoPE, (False) back on the configured
    implementation; None when the model has no RoPE (nothing to compare)."""
    layers = [m for m in model.modules() if getattr(m, "use_rope", False) and hasattr(m, "rope_impl")]
    if not layers:
        return None

    def use_reference(on: bool) -> None:
        for m in layers:
            m.rope_impl = "reference" if on else configured_impl
    return use_reference
