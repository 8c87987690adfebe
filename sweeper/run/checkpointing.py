"""The run's checkpoints, as methods of sweeper.run.Run (a mixin): save and resume bitwise, every rank's RNG too.

    state = run.load_checkpoint()          # None, or what save_checkpoint saved (RNG states restored too)
    run.save_checkpoint(state, step)       # ckpt/step_<step>.pt, atomically, the fingerprint beside the state

The file format is sweeper.run.checkpoint's; this module is what a Run does with it (which checkpoint, which
rank's states, the metrics after it dropped, the health monitor's state restored).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Mapping

from sweeper.run.checkpoint import check_fingerprint, checkpoint_path, save_checkpoint
from sweeper.run.observed.envinfo import cuda_device_count, device_model, thread_count, versions
from sweeper.run.ranks import barrier, gather_to_main, grouped
from sweeper.run.streams import capture_rng_states, restore_rng_states


class RunCheckpoints:
    """Needs Run's state (dir, _config_dict, _consumed, config_hash, seed, rank, world_size, keep_checkpoints,
    _health, ...)."""

    def fingerprint(self, extra: Mapping | None = None) -> dict:
        """What must not change between a checkpoint and its resume: config, seed, versions, threads, devices."""
        lib = versions()
        base = {"config_hash": self.config_hash, "seed": self.seed, "python_version": lib["python"],
                "torch_version": lib["torch"] if "torch" in sys.modules else None,
                "num_threads": thread_count(), "cuda_device_count": cuda_device_count(),
                "world_size": self.world_size, "device_model": device_model()}
        return {**base, **dict(extra or {})}

    def save_checkpoint(self, state: Any, step: int, fingerprint: Mapping | None = None,
                        rank_state: Any = None) -> Path:
        """Write ckpt/step_<step>.pt atomically: `state`, every RNG state, health state, the fingerprint.

        Several ranks: every rank calls it (a collective); rank 0's `state` is saved (the state the ranks
        share: model, optimizer), with every rank's RNG states and its own `rank_state` (what differs between
        ranks), and it returns once the file is written."""
        self._fingerprint = self.fingerprint(fingerprint)
        rng = capture_rng_states()
        everyone = gather_to_main({"rng": rng, "rank_state": rank_state}) if self._collective() else None
        path = checkpoint_path(self.dir.ckpt_dir, int(step))
        if self.is_main:
            blob = {"step": int(step), "state": state, "rng": rng, "fingerprint": self._fingerprint,
                    "config": self._config_dict, "consumed": dict(self._consumed),
                    "health": self._health.state_dict() if self._health else None,
                    "wall_s": self._wall_s()}
            if everyone is not None and len(everyone) > 1:
                blob.update(world_size=len(everyone), ranks=everyone)
            path = save_checkpoint(self.dir.ckpt_dir, int(step), blob, keep=self.keep_checkpoints)
        if everyone is not None or grouped():
            barrier()
        return path

    def load_checkpoint(self, fingerprint: Mapping | None = None) -> Any:
        """The newest valid checkpoint's state (RNG states restored, metrics after it dropped), or None.

        Corrupt newer files are moved aside and named in stdout and the run's status; a checkpoint from another
        setup (fingerprint: world size and device model too) raises FingerprintMismatch naming what differs.
        Several ranks (a collective): rank 0 chooses the checkpoint, every rank reads it and gets its own RNG
        states back, and its rank_state in run.rank_state."""
        loaded = self._load_latest()
        fallback = loaded.path.name if loaded.path else "no valid checkpoint left, restarting from step 0"
        notes = [f"{p.name}: {why}" for p, why in loaded.skipped]
        for line in notes:
            print(f"WARNING: corrupt checkpoint skipped, falling back to an older one ({fallback}): {line}", flush=True)
        if notes and self.is_main:
            self.dir.update_status(warnings=[f"corrupt checkpoint skipped ({fallback}): {s}" for s in notes])
            self.extra["skipped_checkpoints"] = notes
        current = self._fingerprint = self.fingerprint(fingerprint)   # the summary names it even without a save
        if loaded.state is None:
            if self.is_main:
                self.dir.keep_metrics_until(None)
            return None
        blob = loaded.state
        check_fingerprint(blob["fingerprint"], current, self.dir.path, blob.get("config"), self._config_dict)
        mine = (blob.get("ranks") or [{"rng": blob["rng"]}])[self.rank]
        restore_rng_states(mine["rng"])
        self.rank_state = mine.get("rank_state")
        self.start_step = self._last_step = int(blob["step"])
        self._wall_before = float(blob.get("wall_s") or 0.0)     # older checkpoints: this segment only
        self._consumed = dict(blob.get("consumed") or {})        # the compute ledger up to the checkpoint
        if self.is_main:
            self.dir.keep_metrics_until(self.start_step)
        self._health_saved = blob.get("health")
        if self._health is not None and self._health_saved:
            self._health.load_state_dict(self._health_saved)
        self.extra["resumed_from"] = loaded.path.name
        print(f"resumed from {loaded.path} at step {self.start_step}", flush=True)
        return blob["state"]

