"""Typed run configuration of the built-in trainer: a run's resolved config (run.config), validated.

    cfg = RunConfig.from_dict(run.config_dict)   # inside main(run); ConfigError names the key and the fix
    validate(config)                             # the `sweeper.train.checks:validate` hook (conf/task/train.yaml)
    register_schemas(ConfigStore.instance())     # model/ data/ train/ health/ groups (entry point sweeper.schemas)

Each group's dataclass (ModelConfig, StdlibData/TextData, TrainConfig, HealthConfig) is the one place for its
keys, defaults, comments and accepted ranges (its check(), which RunConfig.validate calls); there are no YAMLs.
Pure Python (no torch): the sweeper parent calls `validate` on every planned run before anything starts.
A run's identity (experiment, variant) is not part of its config: it is run.experiment / run.variant.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping

from sweeper.health.thresholds import Thresholds
from sweeper.run import ConfigError as _RunConfigError

POS_ENCODINGS = ("rope", "none")
ROPE_IMPLS = ("auto", "torch", "triton", "reference", "fault_no_qk_grad")
DATA_KINDS = ("stdlib", "text")
DEVICES = ("auto", "cpu", "cuda")
IGNORED = ("experiment", "variant", "experiment_spec")   # identity keys older sweeps wrote into each config


class ConfigError(_RunConfigError):
    """A config value is wrong; the message names the key, the value and what is accepted (exit status 2)."""


@dataclass
class ModelConfig:
    """model=small: a small decoder-only transformer (pre-norm, causal attention, RoPE through `kernels`)."""
    d_model: int = 128
    n_layers: int = 2
    n_heads: int = 4
    context: int = 64              # tokens per training window
    pos_encoding: str = "rope"     # rope | none
    rope_impl: str = "auto"        # auto (Triton on CUDA, fast PyTorch path on CPU) | torch | triton | reference | fault_no_qk_grad
    rope_base: float = 10000.0
    mlp_ratio: int = 4
    dropout: float = 0.0

    def check(self, prefix: str = "model") -> None:
        """The accepted ranges of model.* (ConfigError naming the key)."""
        _positive(self, prefix, "d_model", "n_layers", "n_heads", "context", "mlp_ratio")
        if self.d_model % self.n_heads:
            raise ConfigError(f"{prefix}.d_model={self.d_model} must be divisible by {prefix}.n_heads={self.n_heads}")
        if self.pos_encoding == "rope" and (self.d_model // self.n_heads) % 2:
            raise ConfigError(f"{prefix}.d_model / {prefix}.n_heads = {self.d_model // self.n_heads}: RoPE needs an "
                              f"even head dim")
        _choice(f"{prefix}.pos_encoding", self.pos_encoding, POS_ENCODINGS)
        _choice(f"{prefix}.rope_impl", self.rope_impl, ROPE_IMPLS)
        if self.rope_base <= 0:
            raise ConfigError(f"{prefix}.rope_base={self.rope_base}: must be positive")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"{prefix}.dropout={self.dropout}: accepted is 0 <= dropout < 1")


@dataclass
class StdlibData:
    """data=stdlib (the default): the embedded corpus, the Python standard library's own Lib/*.py sources
    sorted by name (no download)."""
    kind: str = "stdlib"
    n_files: int = 60              # the first N files of Lib/*.py in sorted order
    val_fraction: float = 0.1      # the last 10% of characters are the validation split

    def check(self, prefix: str = "data") -> None:
        """The accepted ranges of data.* (the corpus itself is checked by sweeper.train.checks)."""
        _check_data(self, prefix)
        if self.kind == "stdlib" and self.n_files <= 0:
            raise ConfigError(f"{prefix}.n_files={self.n_files}: must be a positive integer")


@dataclass
class TextData:
    """data=text: a user's own UTF-8 text file, `data=text data.path=/path/to/corpus.txt`."""
    kind: str = "text"
    path: str = "???"              # required: the corpus file
    val_fraction: float = 0.1      # the last 10% of characters are the validation split

    def check(self, prefix: str = "data") -> None:
        """The accepted ranges of data.* (the file itself is checked by sweeper.train.checks)."""
        _check_data(self, prefix)


def _check_data(data, prefix: str) -> None:
    _choice(f"{prefix}.kind", data.kind, DATA_KINDS)
    if not 0.0 < data.val_fraction < 0.5:
        raise ConfigError(f"{prefix}.val_fraction={data.val_fraction}: accepted is 0 < val_fraction < 0.5")


@dataclass
class DataConfig(StdlibData):
    """A run's `data` block, of either option (its keys are StdlibData's and TextData's)."""
    path: str | None = None


@dataclass
class TrainConfig:
    """train=default: AdamW, warmup + cosine decay, a fixed number of steps."""
    steps: int = 300
    batch_size: int = 32
    lr: float = 3e-3
    weight_decay: float = 0.1
    warmup_steps: int = 20
    grad_clip: float = 1.0
    log_interval: int = 10         # steps between metrics lines
    eval_interval: int = 50        # steps between validation passes (and always at the last step)
    eval_batches: int = 4          # fixed validation batches, the same for every variant of a seed
    ckpt_interval: int = 100       # steps between RNG-state checkpoints (0 = only at the end / on a stop signal)
    keep_checkpoints: int = 2      # keep the newest k (>= 2) valid checkpoints
    deterministic: bool = True     # determinism flags; false trades bitwise reproducibility for speed
    device: str = "auto"           # auto (cuda if visible, else cpu) | cpu | cuda

    def check(self, prefix: str = "train") -> None:
        """The accepted ranges of train.*."""
        _positive(self, prefix, "steps", "batch_size", "eval_batches", "log_interval", "eval_interval")
        if self.lr <= 0:
            raise ConfigError(f"{prefix}.lr={self.lr}: must be positive")
        for key in ("ckpt_interval", "warmup_steps", "grad_clip", "weight_decay"):
            if getattr(self, key) < 0:
                raise ConfigError(f"{prefix}.{key}={getattr(self, key)}: must be >= 0")
        if self.keep_checkpoints < 2:
            raise ConfigError(f"{prefix}.keep_checkpoints={self.keep_checkpoints}: keep at least 2 so a corrupt "
                              "newest checkpoint can fall back to the previous one")
        _choice(f"{prefix}.device", self.device, DEVICES)


@dataclass
class HealthConfig:
    """health=default: live monitors during training and preflight checks before it."""
    interval: int = 10             # steps between monitor records in the metrics
    preflight: bool = True         # run the preflight checks at the start of each run (written to health.json)
    thresholds: Dict[str, Any] = field(default_factory=dict)   # sweeper.health.Thresholds overrides, by name

    def check(self, prefix: str = "health") -> None:
        """The accepted ranges of health.*."""
        _positive(self, prefix, "interval")

        try:
            Thresholds.from_dict(self.thresholds, f"{prefix}.thresholds")
        except ValueError as e:
            raise ConfigError(str(e)) from None


GROUPS = {("model", "small"): ModelConfig, ("data", "stdlib"): StdlibData, ("data", "text"): TextData,
          ("train", "default"): TrainConfig, ("health", "default"): HealthConfig}


def register_schemas(cs) -> None:
    """The `sweeper.schemas` entry point (pyproject.toml): the trainer's groups as Hydra structured configs."""
    for (group, name), node in GROUPS.items():
        cs.store(group=group, name=name, node=node, provider="train")


@dataclass
class RunConfig:
    seed: int = 0
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    health: HealthConfig = field(default_factory=HealthConfig)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RunConfig":
        """Build and validate; unknown keys and bad values raise ConfigError naming them."""
        d = dict(d)
        subs = {"model": ModelConfig, "data": DataConfig, "train": TrainConfig, "health": HealthConfig}
        kwargs: dict[str, Any] = {}
        for name, sub_cls in subs.items():
            kwargs[name] = _build(sub_cls, d.pop(name, {}) or {}, name)
        if "seed" in d:
            kwargs["seed"] = d.pop("seed")
        for key in IGNORED:                      # written into configs by older sweeps
            d.pop(key, None)
        if d:
            raise ConfigError(f"unknown run config key(s) {', '.join(sorted(d))}: the built-in trainer (task=train) "
                              f"takes seed, {', '.join(subs)}")
        cfg = cls(**kwargs)
        cfg.validate()
        return cfg

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def validate(self) -> None:
        """The seed, then each group's own ranges (its dataclass's check(): the one place for them)."""
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ConfigError(f"seed={self.seed!r}: a seed is a non-negative integer")
        for name in ("model", "data", "train", "health"):
            getattr(self, name).check(name)


def _build(sub_cls: type, values: Mapping[str, Any], prefix: str):
    known = {f.name: f for f in dataclasses.fields(sub_cls)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(f"unknown config key {prefix}.{unknown[0]}: accepted keys of {prefix} are "
                          f"{', '.join(sorted(known))}")
    out = {}
    for key, value in values.items():
        out[key] = _coerce(f"{prefix}.{key}", value, known[key].type)
    return sub_cls(**out)


def _coerce(key: str, value: Any, annotation: str):
    kinds = {"int": int, "float": float, "bool": bool, "str": str}
    want = annotation.split("|")[0].strip()
    if value is None and "None" in annotation:
        return None
    if want == "float" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if want == "float" and isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{key}={value!r}: must be a finite number (inf and nan are refused)")
    expected = kinds.get(want)
    if expected is not None:
        bad = not isinstance(value, expected) or (expected is int and isinstance(value, bool))
        if bad:
            raise ConfigError(f"{key}={value!r}: expected {want}")
    return value


def _positive(obj: Any, prefix: str, *keys: str) -> None:
    for key in keys:
        value = getattr(obj, key)
        if value <= 0:
            raise ConfigError(f"{prefix}.{key}={value}: must be a positive integer")


def _choice(key: str, value: str, accepted: tuple[str, ...]) -> None:
    if value not in accepted:
        raise ConfigError(f"{key}={value!r}: accepted values are {', '.join(accepted)}")
