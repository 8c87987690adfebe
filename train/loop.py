"""The training loop of one run: determinism, seed streams, resume, train, evaluate, checkpoint, summarise.

    python -m train RUN_DIR            # trains RUN_DIR/config.yaml (what the launcher runs)
    summary = train.run(cfg, run_dir)  # the same, in-process

A run dir that holds checkpoints continues from the newest valid one and ends bitwise equal to the run that
never stopped (same thread count and device; the fingerprint check refuses anything else).
"""
from __future__ import annotations

import math
import random
import time
from pathlib import Path

import numpy as np
import torch

from train.atomic import append_jsonl, atomic_write_json, read_json, read_jsonl, rewrite_jsonl
from train.batches import EpochSampler, eval_starts, tensor_hash, windows
from train.checkpoint import check_fingerprint, load_latest, save_checkpoint
from train.config import RunConfig
from train.corpus import load_corpus
from train.determinism import set_determinism
from train.envinfo import device_name, environment_record, versions
from train.model import Transformer
from train.stopping import EXIT_INTERRUPTED, StopRequest
from train.streams import SeedStreams, capture_rng_states, dropped_states, restore_rng_states
from train.trail import hooks_from_env
from sweeper.health.run_health import RunHealth   # health: preflight, live monitor, health.json (issue 5)



def pick_device(cfg: RunConfig) -> torch.device:
    if cfg.train.device == "cuda" or (cfg.train.device == "auto" and torch.cuda.is_available()):
        return torch.device("cuda")
    return torch.device("cpu")


def lr_at(step: int, cfg: RunConfig) -> float:
    """Linear warmup, then cosine decay to 10% of train.lr."""
    t = cfg.train
    if step < t.warmup_steps:
        return t.lr * (step + 1) / t.warmup_steps
    progress = (step - t.warmup_steps) / max(1, t.steps - t.warmup_steps)
    return t.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0))))


def make_optimizer(params, cfg: RunConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (not on norms and biases)."""
    params = list(params)
    return torch.optim.AdamW(
        [{"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.train.weight_decay},
         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
        lr=cfg.train.lr, betas=(0.9, 0.95), foreach=False)


class Trainer:
    """Everything one run needs, built from the config and the seed streams (no global state in the loop)."""

    def __init__(self, cfg: RunConfig, run_dir: Path):
        self.cfg, self.run_dir = cfg, Path(run_dir)
        self.flags = set_determinism(cfg.train.deterministic)
        self.device = pick_device(cfg)
        streams = SeedStreams(cfg.seed)
        self.corpus = load_corpus(cfg.data)
        T, B = cfg.model.context, cfg.train.batch_size
        torch.manual_seed(streams.seed_for("init"))
        self.model = Transformer(cfg.model, self.corpus.vocab_size).to(self.device)
        torch.manual_seed(streams.seed_for("dropout"))               # global torch RNG = dropout stream
        if self.device.type == "cuda":
            torch.cuda.manual_seed_all(streams.seed_for("dropout"))
        random.seed(streams.seed_for("python"))
        np.random.seed(streams.seed_for("python") % 2**32)
        self.optimizer = make_optimizer(self.model.parameters(), cfg)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: lr_at(s, cfg) / cfg.train.lr)
        self.sampler = EpochSampler((len(self.corpus.train) - 1) // T, B, streams.generator("data_order"))
        self.eval_starts = eval_starts(len(self.corpus.val), T, cfg.train.eval_batches, B,
                                       streams.generator("eval_batches"))      # (n_eval, B)
        first_epoch = torch.randperm(self.sampler.n_windows, generator=streams.generator("data_order"))
        lib = versions()
        self.fingerprint = {
            "config_hash": cfg.config_hash(), "seed": cfg.seed, "corpus_hash": self.corpus.text_sha256[:16],
            "data_order_hash": tensor_hash(first_epoch), "eval_batches_hash": tensor_hash(self.eval_starts),
            "torch_version": lib["torch"], "python_version": lib["python"],
            "triton_version": lib["triton"], "device": device_name(self.device),
            "cuda_device_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
            "world_size": 1, "num_threads": torch.get_num_threads(),
            "deterministic": cfg.train.deterministic, "determinism_flags": self.flags,
        }
        self.last_starts: torch.Tensor | None = None    # (B,) window indices of the latest batch (audit trail)

    def batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        self.last_starts = self.sampler.next_indices()                          # (B,)
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

    def state_dict(self, step: int, extra: dict) -> dict:
        return {
            "step": step, "fingerprint": self.fingerprint, "config": self.cfg.to_dict(),
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "sampler": None if "data_order" in dropped_states() else self.sampler.state_dict(),
            "rng": capture_rng_states(),
            "extra": extra,
        }

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if state["sampler"] is not None:      # None only under the test-only fault switch
            self.sampler.load_state_dict(state["sampler"])
        restore_rng_states(state["rng"])


def run(cfg: RunConfig | dict, run_dir: str | Path, on_step=None) -> dict:
    """Train one run in `run_dir` (resuming from its checkpoints); returns the summary written to summary.json.

    on_step(trainer, step, stop) runs after every optimizer step (the resume audit's state trail; it may set
    stop.requested); without one, the audit switches in the environment may supply it (train/trail.py).
    """
    cfg = cfg if isinstance(cfg, RunConfig) else RunConfig.from_dict(cfg)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    done = read_json(run_dir / "summary.json")
    if done and done.get("status") == "finished" and done.get("fingerprint", {}).get("config_hash") == cfg.config_hash():
        return done
    t0 = time.time()
    run_id = (read_json(run_dir / "status.json") or {}).get("run_id") or run_dir.name   # the plan's id
    status = {"status": "running", "run_id": run_id, "variant": cfg.variant, "seed": cfg.seed,
              "error": None, "exit_code": None, "started": t0, "ended": None}
    atomic_write_json(run_dir / "status.json", status)
    trainer = Trainer(cfg, run_dir)
    env = environment_record(trainer.device)
    atomic_write_json(run_dir / "env.json", env)
    step, notes = _resume(trainer, run_dir, status)
    health = RunHealth(cfg, trainer.model, trainer.corpus, run_dir, step, (notes.get("extra") or {}).get("health"))
    with StopRequest() as stop:
        outcome = _train(trainer, run_dir, step, stop, on_step or hooks_from_env(), notes.get("extra") or {},
                         health)
    health.finish(outcome)                                            # health: final health.json
    status.update(outcome["status_fields"], ended=time.time())
    summary = {"run_id": run_id, "variant": cfg.variant, "seed": cfg.seed, "status": status["status"],
               "steps": outcome["step"], "wall_time_s": time.time() - t0, "final": outcome["final"],
               "fingerprint": trainer.fingerprint, "env": env, "determinism": trainer.flags,
               "resumed_from": notes.get("resumed_from"), "skipped_checkpoints": notes.get("skipped", [])}
    atomic_write_json(run_dir / "summary.json", summary)
    atomic_write_json(run_dir / "status.json", status)
    return summary


def _resume(trainer: Trainer, run_dir: Path, status: dict) -> tuple[int, dict]:
    loaded = load_latest(run_dir / "ckpt")
    notes: dict = {"skipped": [f"{p.name}: {why}" for p, why in loaded.skipped]}
    fallback = loaded.path.name if loaded.path else "no valid checkpoint left, restarting from step 0"
    for line in notes["skipped"]:
        print(f"WARNING: corrupt checkpoint skipped, falling back to an older one ({fallback}): {line}", flush=True)
    if notes["skipped"]:
        status["warnings"] = [f"corrupt checkpoint skipped ({fallback}): {s}" for s in notes["skipped"]]
        atomic_write_json(run_dir / "status.json", status)   # visible while the run goes on
    if loaded.state is None:
        if (run_dir / "metrics.jsonl").exists():
            (run_dir / "metrics.jsonl").unlink()          # restart from step 0: old lines would be duplicates
        return 0, notes
    check_fingerprint(loaded.state["fingerprint"], trainer.fingerprint, run_dir, loaded.state.get("config"),
                      trainer.cfg.to_dict())
    trainer.load_state_dict(loaded.state)
    step = loaded.state["step"]
    kept = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r.get("step", 0) <= step]
    rewrite_jsonl(run_dir / "metrics.jsonl", kept)        # drop lines logged after the checkpoint
    notes["resumed_from"] = loaded.path.name
    notes["extra"] = loaded.state.get("extra") or {}
    print(f"resumed from {loaded.path} at step {step}", flush=True)
    return step, notes


def _diverged(step: int, last_ckpt: int, train_loss, val_loss, why: str) -> dict:
    return {"step": step, "final": {"val_loss": val_loss, "train_loss": train_loss},
            "status_fields": {"status": "diverged", "exit_code": 0, "diverged_at_step": step,
                              "last_good_checkpoint": last_ckpt, "error": f"{why} at step {step}"}}


def _train(tr: Trainer, run_dir: Path, step: int, stop: StopRequest, on_step=None, extra: dict | None = None,
           health: RunHealth | None = None) -> dict:
    cfg, t = tr.cfg, tr.cfg.train
    ckpt_dir = run_dir / "ckpt"
    last_ckpt = step
    recent: list[float] = list((extra or {}).get("recent", []))     # loss window, restored on resume
    val_loss = (extra or {}).get("val_loss", math.nan)
    tick, tick_step = time.time(), step

    def checkpoint(at: int) -> None:
        nonlocal last_ckpt
        save_checkpoint(ckpt_dir, at, tr.state_dict(at, {"recent": recent, "val_loss": val_loss,
                                                         "health": health.state_dict() if health else None}),
                        keep=t.keep_checkpoints)
        last_ckpt = at

    while step < t.steps:
        if stop.requested:
            if step != last_ckpt:
                checkpoint(step)
            return {"step": step, "final": {"val_loss": None, "train_loss": None},
                    "status_fields": {"status": "interrupted", "exit_code": EXIT_INTERRUPTED,
                                      "error": f"stopped by {stop.requested} at step {step}; checkpoint saved"}}
        x, y = tr.batch()
        _, loss = tr.model(x, y)
        tr.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(tr.model.parameters(), t.grad_clip or float("inf"))
        loss_value, grad_norm_value = loss.item(), grad_norm.item()
        health_rec = health.after_backward(step, loss_value, grad_norm_value) if health else {}   # health: monitor
        if not (math.isfinite(loss_value) and math.isfinite(grad_norm_value)):
            return _diverged(step, last_ckpt, loss_value, None,
                             f"non-finite loss or gradient (loss={loss_value}, grad norm={grad_norm_value})")
        tr.optimizer.step()
        if health:
            health_rec.update(health.after_step(step))                      # health: update/weight ratios
        tr.scheduler.step()
        step += 1
        recent = (recent + [loss_value])[-t.log_interval:]
        is_eval = step % t.eval_interval == 0 or step == t.steps
        if is_eval:
            val_loss = tr.evaluate()
        if step % t.log_interval == 0 or is_eval or health_rec:
            now = time.time()
            record = {"step": step, "train_loss": loss_value, "train_loss_avg": float(np.mean(recent)),
                      "grad_norm": grad_norm_value, "lr": tr.scheduler.get_last_lr()[0],
                      "tokens_per_s": (step - tick_step) * t.batch_size * cfg.model.context / max(now - tick, 1e-9)}
            if is_eval:
                record["val_loss"] = val_loss
            record.update(health_rec)                                        # health: health/... metrics
            append_jsonl(run_dir / "metrics.jsonl", record)
            tick, tick_step = now, step
        if is_eval and not math.isfinite(val_loss):
            return _diverged(step, last_ckpt, loss_value, val_loss, f"non-finite validation loss ({val_loss})")
        if t.ckpt_interval and step % t.ckpt_interval == 0 and step < t.steps:
            checkpoint(step)
        if on_step is not None:
            on_step(tr, step, stop)
    checkpoint(step)
    return {"step": step, "final": {"val_loss": val_loss, "train_loss": float(np.mean(recent))},
            "status_fields": {"status": "finished", "exit_code": 0}}
