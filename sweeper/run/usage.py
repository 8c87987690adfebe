"""What a run actually used, as methods of sweeper.run.Run (a mixin): the config keys it read, whether it drew from
each generator it was handed, what it consumed (examples, tokens, optimizer steps) and the size of its data. The
run's summary records it (the `used` block: sweeper.run.files.usage.Usage); the checks across runs read it.

    cfg = run.config                        # every key read through it is recorded (cfg.lr, cfg["model"], get, select)
    run.consumed(examples=64, tokens=64 * 128, steps=1)   # each step (counts add up; checkpoints keep them)
    run.data_size(train=len(train_set), eval=len(val_set))
    run.finish(val_loss=v, examples_seen=n_examples, optimizer_steps=n_steps)   # or totals, reported at the end

Every key whose value was read is recorded, also through a whole mapping (iterated, OmegaConf.to_container,
instantiate); a mapping copied or pickled is read whole ("model.*"), and `run.config_dict` is the whole config
at once ("*"). Generators handed out by
run.generator / run.numpy_rng are drawn from when their state at the end differs from their state when handed
out. Torch-free (a torch generator's state is read only when the run holds one).
"""
from __future__ import annotations

import sys
from typing import Any

from sweeper.run.files.usage import REPORTED, WHOLE, Usage, reported_count


class ConfigReads:
    """The dotted keys a run read from its config (copies of it share this one set)."""

    def __init__(self):
        self.keys: set[str] = set()

    def add(self, key: str) -> None:
        self.keys.add(key.split("[", 1)[0] or WHOLE)

    def __deepcopy__(self, memo):          # a copied config keeps recording into the run's set
        return self

    def __copy__(self):
        return self


def track_reads(config: Any, reads: ConfigReads) -> Any:
    """Make every DictConfig node of `config` record the keys read through it into `reads` (in place)."""
    tracked = _tracked_class()
    stack = [(config, "")]
    while stack:
        node, prefix = stack.pop()
        if type(node).__name__ == "DictConfig" or isinstance(node, tracked):
            object.__setattr__(node, "__class__", tracked)
            node.__dict__["_sweeper_reads"], node.__dict__["_sweeper_prefix"] = reads, prefix
            stack += [(child, f"{prefix}{key}.") for key, child in (node.__dict__["_content"] or {}).items()]
        elif type(node).__name__ == "ListConfig":     # a mapping inside a list: reading the list reads it
            stack += [(child, prefix.rstrip(".") + "[].") for child in node.__dict__["_content"] or []]
    return config


_TRACKED: list[type] = []


def _tracked_class() -> type:
    if _TRACKED:
        return _TRACKED[0]
    from omegaconf import DictConfig  # deferred: omegaconf (0.1 s), only when a run's config is built

    class TrackedConfig(DictConfig):
        """A DictConfig that records the keys read through it (sweeper.run.usage)."""

        def _get_node(self, key, *args, **kwargs):
            node = super()._get_node(key, *args, **kwargs)
            reads = self.__dict__.get("_sweeper_reads")
            if reads is not None and node is not None:
                reads.add(f"{self.__dict__['_sweeper_prefix']}{key}")
            return node

        def _whole(self) -> None:
            reads = self.__dict__.get("_sweeper_reads")
            if reads is not None:
                reads.add(f"{self.__dict__['_sweeper_prefix']}{WHOLE}")   # "model.*": all of model

        def __deepcopy__(self, memo):
            self._whole()
            return super().__deepcopy__(memo)

        def __getstate__(self):
            self._whole()
            return super().__getstate__()

    _TRACKED.append(TrackedConfig)
    return TrackedConfig


class RunUsage:
    """Needs Run's _reads (ConfigReads; None for a zero-glue command: not the run's to tell), _config_dict,
    _handed (stream -> [(generator, its state when handed out)]), _consumed and _sizes (counts), set by
    Run.__init__."""

    @property
    def config_dict(self) -> dict:
        """The run's resolved config as a plain dict (reading it counts as reading every key)."""
        if self._reads is not None:
            self._reads.add(WHOLE)
        return self._config_dict

    def consumed(self, examples: int = 0, tokens: int = 0, steps: int = 0) -> None:
        """Add what this step consumed to the run's compute ledger (checkpoints keep the running totals)."""
        for name, value in (("examples", examples), ("tokens", tokens), ("steps", steps)):
            if value:
                self._consumed[name] = self._consumed.get(name, 0) + reported_count(name, value)

    def data_size(self, train: Any = None, eval: Any = None) -> None:
        """The number of training and evaluation examples (a count, or anything with a len())."""
        for name, value in (("train_size", train), ("eval_size", eval)):
            if value is not None:
                self._sizes[name] = reported_count(name, len(value) if hasattr(value, "__len__") else value)

    def _hand_out(self, stream: str, generator: Any) -> Any:
        self._handed.setdefault(stream, []).append((generator, _state(generator)))
        return generator

    def _usage(self, final: dict) -> Usage:
        """The summary's `used` block; the documented keys in `final` (examples_seen=...) move into it."""
        counts = {**self._consumed, **self._sizes}
        for key, field_name in REPORTED.items():
            if key in final:
                try:
                    counts[field_name] = reported_count(key, final.pop(key))
                except ValueError as e:               # a bad count must not cost the run its result
                    print(f"WARNING: not recorded: {e}", file=sys.stderr, flush=True)
        return Usage(config_read=None if self._reads is None else sorted(self._reads.keys),
                     generators=self._generators_drawn(), **counts)

    def _generators_drawn(self) -> dict[str, bool]:
        """stream -> whether any generator of it handed out (run.generator, run.numpy_rng) was drawn from."""
        return {s: any(_state(g) != first for g, first in handed) for s, handed in self._handed.items()}


def _state(generator: Any) -> Any:
    """A generator's state, comparable with ==: torch's as bytes, numpy's bit generator state."""
    if hasattr(generator, "get_state"):
        return bytes(generator.get_state().numpy().tobytes())
    state = getattr(generator, "bit_generator", None)
    return repr(state.state) if state is not None else None
