"""The built-in trainer's loop, a plain client of the run API (sweeper.run): build, resume, train, evaluate, end.

    python -m sweeper.run sweeper.train:main RUN_DIR    # what a sweep with task=train launches (python -m sweeper.train
    RUN_DIR too)
    summary = train.run(cfg, run_dir)           # the same, in-process

Everything that touches the run dir or the process goes through the Run: the config (run.config), the seed
streams (run.streams), checkpoints (run.save_checkpoint / run.load_checkpoint add every RNG state, the health
state and the fingerprint to the trainer's own state), metrics (run.log), health (run.health), the stop flag
(run.should_stop) and the ending (run.finish / run.diverged / run.interrupt). A run dir that holds checkpoints
continues from the newest valid one and ends bitwise equal to the run that never stopped (same thread count,
world size and device; the fingerprint check refuses anything else). With launcher.ranks_per_run=N the run is
N ranks training data-parallel (train/parallel.py: gloo on CPU, nccl on CUDA): the same model everywhere, each
rank its shard of the global batch, gradients and the logged loss averaged over the ranks; rank 0 writes.
"""
from __future__ import annotations

import math
import random
import time
from typing import Any, Callable

import numpy as np
import torch

from sweeper.health.thresholds import Thresholds
from sweeper.run.observed.envinfo import versions
from sweeper.run.streams import SeedStreams, dropped_states
from sweeper.train.batches import EpochSampler, eval_starts, tensor_hash, windows
from sweeper.train.config import RunConfig
from sweeper.train.corpus import load_corpus
from sweeper.train.determinism import set_determinism
from sweeper.train.model import Transformer
from sweeper.train.optim import device_name, make_optimizer, make_scheduler, pick_device
from sweeper.train.parallel import DataParallel
from sweeper.train.preflight import preflight_model
from sweeper.train.trail import hooks_from_env

OnStep = Callable[["Trainer", int, Any], None]    # on_step(trainer, step, run) after every optimizer step


class Trainer:
    """Everything one run trains with, built from the config and the seed streams (no global state in the loop)."""

    def __init__(self, cfg: RunConfig, streams: SeedStreams | None = None, rank_streams: SeedStreams | None = None,
                 parallel: DataParallel | None = None):
        streams = streams or SeedStreams(cfg.seed)
        rank_streams = rank_streams or streams       # this rank's own streams (dropout, python, numpy)
        self.cfg = cfg
        self.parallel = parallel or DataParallel(0, 1)
        self.parallel.check_batch(cfg.train.batch_size)
        self.flags = set_determinism(cfg.train.deterministic)
        self.device = pick_device(cfg)
        self.corpus = load_corpus(cfg.data)
        T, B = cfg.model.context, cfg.train.batch_size
        torch.manual_seed(streams.seed_for("init"))
        self.model = Transformer(cfg.model, self.corpus.vocab_size).to(self.device)
        self.parallel.same_everywhere(self.model)
        torch.manual_seed(rank_streams.seed_for("dropout"))          # global torch RNG = this rank's dropout stream
        if self.device.type == "cuda":
            torch.cuda.manual_seed_all(rank_streams.seed_for("dropout"))
        random.seed(rank_streams.seed_for("python"))
        np.random.seed(rank_streams.seed_for("python") % 2**32)
        self.optimizer = make_optimizer(self.model.parameters(), cfg)
        self.scheduler = make_scheduler(self.optimizer, cfg)
        self.sampler = EpochSampler((len(self.corpus.train) - 1) // T, B, streams.generator("data_order"))
        self.eval_starts = eval_starts(len(self.corpus.val), T, cfg.train.eval_batches, B,
                                       streams.generator("eval_batches"))      # (n_eval, B)
        first_epoch = torch.randperm(self.sampler.n_windows, generator=streams.generator("data_order"))
        self.fingerprint = {     # what the run API's own fingerprint (config, seed, versions, threads) lacks
            "corpus_hash": self.corpus.text_sha256[:16], "data_order_hash": tensor_hash(first_epoch),
            "eval_batches_hash": tensor_hash(self.eval_starts), "triton_version": versions()["triton"],
            "device": device_name(self.device), "world_size": self.parallel.world_size,
            "deterministic": cfg.train.deterministic, "determinism_flags": self.flags,
        }
        self.last_starts: torch.Tensor | None = None    # (B,) window indices of the latest batch (audit trail)

    def batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        self.last_starts = self.parallel.shard(self.sampler.next_indices())     # (B / W,) of the global (B,)
        starts = self.last_starts * self.cfg.model.context                      # (B,)
        x, y = windows(self.corpus.train, starts, self.cfg.model.context)       # (B, T) each
        return x.to(self.device), y.to(self.device)

    @torch.no_grad()
    def evaluate(self) -> float:
        self.model.eval()
        losses = []
        for starts in self.eval_starts:
            x, y = windows(self.corpus.val, starts, self.cfg.model.context)
            losses.append(self.model(x.to(self.device), y.to(self.device))[1].item())
        self.model.train()
        return float(np.mean(losses))

    def state_dict(self) -> dict:
        """The trainer's part of a checkpoint (the run API adds the RNG states, health and fingerprint)."""
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "sampler": None if "data_order" in dropped_states() else self.sampler.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if state["sampler"] is not None:      # None only under the test-only fault switch
            self.sampler.load_state_dict(state["sampler"])


def main(run, on_step: OnStep | None = None) -> dict:
    """Train the run `run` (a sweeper.run.Run), resuming from its checkpoints; returns its summary.

    on_step(trainer, step, run) runs after every optimizer step (the resume audit's state trail; it may call
    run.request_stop); without one, the audit switches in the environment may supply it (train/trail.py)."""
    cfg = RunConfig.from_dict({**run.config_dict, "seed": run.seed})
    run.keep_checkpoints = cfg.train.keep_checkpoints
    set_determinism(cfg.train.deterministic)       # before run.distributed(): nccl initialises CUDA
    backend = run.distributed()                    # joins the run's process group when it has several ranks
    if backend:
        run.extra["distributed"] = {"backend": backend, "world_size": run.world_size}
    trainer = Trainer(cfg, run.streams, run.rank_streams, DataParallel(run.rank, run.world_size))
    run.record_env(device=device_name(trainer.device))
    run.extra["determinism"] = trainer.flags
    run.eval_fingerprint({"val_tokens": trainer.corpus.val, "context": cfg.model.context,     # what it is evaluated
                          "eval_batches": cfg.train.eval_batches, "batch_size": cfg.train.batch_size},  # on
                         size=cfg.train.eval_batches * cfg.train.batch_size)     # windows evaluated
    run.data_size(train=trainer.sampler.n_windows)                   # windows the data order draws from
    state = run.load_checkpoint(fingerprint=trainer.fingerprint)
    loop = {"recent": [], "val_loss": math.nan}
    if state is not None:
        trainer.load_state_dict(state)
        loop = state["loop"]
        trainer.parallel.same_everywhere(trainer.model)
    thresholds = Thresholds.from_dict(cfg.health.thresholds)          # health.thresholds.NAME=value
    preflight = (lambda: preflight_model(cfg, trainer.model, trainer.corpus, thresholds)) \
        if cfg.health.preflight else None
    health = run.health(trainer.model, num_classes=trainer.corpus.vocab_size, interval=cfg.health.interval,
                        preflight=preflight, thresholds=thresholds, optimizer=trainer.optimizer,
                        total_steps=cfg.train.steps)      # lr schedule and optimizer parameters watched too
    return _train(run, trainer, health, loop, on_step or hooks_from_env())


def _train(run, tr: Trainer, health, loop: dict, on_step: OnStep | None) -> dict:
    t = tr.cfg.train
    step = last_ckpt = run.start_step
    recent: list[float] = list(loop["recent"])     # the loss window, restored on resume
    val_loss = loop["val_loss"]
    tick, tick_step = time.time(), step
    started = tick

    def checkpoint(at: int) -> None:
        nonlocal last_ckpt
        run.save_checkpoint({**tr.state_dict(), "loop": {"recent": recent, "val_loss": val_loss}}, at,
                            fingerprint=tr.fingerprint)
        last_ckpt = at

    while step < t.steps:
        if run.should_stop:
            if step != last_ckpt:
                checkpoint(step)
            run.interrupt(step)
            return run.summary
        x, y = tr.batch()
        _, loss = tr.model(x, y)
        tr.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        loss = tr.parallel.average(tr.model.parameters(), loss)   # grads and loss: the ranks' mean
        grad_norm = torch.nn.utils.clip_grad_norm_(tr.model.parameters(), t.grad_clip or float("inf"))
        loss_value, grad_norm_value = loss.item(), grad_norm.item()
        health_rec = health.after_backward(step, loss_value, grad_norm_value)
        if not (math.isfinite(loss_value) and math.isfinite(grad_norm_value)):
            return run.diverged(step, f"non-finite loss or gradient (loss={loss_value}, grad norm={grad_norm_value})",
                                last_good_checkpoint=last_ckpt, val_loss=None, train_loss=loss_value)
        tr.optimizer.step()
        health_rec.update(health.after_step(step))                  # update/weight ratios on interval steps
        tr.scheduler.step()
        step += 1
        recent = (recent + [loss_value])[-t.log_interval:]
        is_eval = step % t.eval_interval == 0 or step == t.steps
        if is_eval:
            val_loss = tr.evaluate()
        if step % t.log_interval == 0 or is_eval or health_rec:
            now = time.time()
            record = {"train_loss": loss_value, "train_loss_avg": float(np.mean(recent)),
                      "grad_norm": grad_norm_value, "lr": tr.scheduler.get_last_lr()[0],
                      "tokens_per_s": (step - tick_step) * t.batch_size * tr.cfg.model.context / max(now - tick, 1e-9)}
            if is_eval:
                record["val_loss"] = val_loss
            run.log(step, **record)                                 # + the health/... metrics measured
            tick, tick_step = now, step
        if is_eval and not math.isfinite(val_loss):
            return run.diverged(step, f"non-finite validation loss ({val_loss})", last_good_checkpoint=last_ckpt,
                                val_loss=val_loss, train_loss=loss_value)
        if t.ckpt_interval and step % t.ckpt_interval == 0 and step < t.steps:
            checkpoint(step)
        if on_step is not None:
            on_step(tr, step, run)
    checkpoint(step)
    trained = step - run.start_step                                 # steps of this attempt (a resume: its part)
    cost = {"tokens_per_s": trained * t.batch_size * tr.cfg.model.context / max(time.time() - started, 1e-9)}
    if tr.device.type == "cuda":
        cost["peak_cuda_mem_mb"] = torch.cuda.max_memory_allocated(tr.device) / 2**20
    examples = step * t.batch_size                                  # the compute ledger (one global batch a step)
    return run.finish(val_loss=val_loss, train_loss=float(np.mean(recent)), steps=step, cost=cost,
                      examples_seen=examples, tokens_seen=examples * tr.cfg.model.context, optimizer_steps=step)
