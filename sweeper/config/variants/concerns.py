"""What each changed key of a variant is about: its concern (model, optimizer, data, evaluation, budget, other),
so a variant that changes more than one concern at once is named (the one-change lint at plan time, the
`several_concerns` check across runs at report time).

    concern_of("optim.lr")                               # 'optimizer' (the key lives in an optimizer group)
    concern_of("n_train", swapped="dataset")             # 'data' (a root key set by the swap dataset=...)
    by_concern(["model.d_model", "optim.lr"], [Declared("model=big", ("model.d_model", "optim.lr"))])
    # {'model': [('model.d_model', 'model=big')], 'optimizer': [('optim.lr', 'model=big')]}

A key's concern is decided from evidence that does not depend on one project's spelling, first match wins:
  1. evaluation: a word of the key names the evaluation data (val, eval, test, dev, holdout; not a schedule such
     as eval_interval);
  2. an unambiguous leaf: a learning-rate / optimizer setting (lr, weight_decay, momentum, betas, warmup, grad
     clipping) is optimizer, a training length (steps, epochs, tokens, timesteps, a time limit; not warmup or
     eval schedules) or examples per step (batch_size) is budget, wherever the key lives;
  3. the config group the key lives in: a folder of its path named like a concern's group (model / arch / net /
     encoder ...: model; optim / optimizer / scheduler: optimizer; data / dataset / loader / augment /
     tokenizer ...: data; eval: evaluation; budget: budget);
  4. the config group a group swap chose (`dataset=other` setting root keys: data);
  5. the leaf's words as a hint (width, depth, layers, heads, dropout, activation: model; shuffle, subset,
     augment, n_train: data);
  6. otherwise `other`.
Pure functions on key names and the declared changes (sweeper.config.variants.config_diff.Declared): torch- and
Hydra-free, so the report path uses them too.
"""
from __future__ import annotations

import re
from typing import Iterable

from sweeper.config.variants.config_diff import Declared

CONCERNS = ("model", "optimizer", "data", "evaluation", "budget", "other")

EVAL_WORDS = frozenset({"val", "valid", "validation", "eval", "evaluation", "evaluate", "test", "dev", "holdout",
                        "heldout"})
SCHEDULE_WORDS = frozenset({"interval", "every", "freq", "frequency", "period", "log", "print", "patience"})
# groups (a folder of the key's path, or the group a swap chose), by concern
GROUPS = {
    "model": {"model", "models", "arch", "architecture", "network", "net", "backbone", "encoder", "decoder",
              "module", "head", "transformer", "policy", "critic", "actor"},
    "optimizer": {"optim", "optimizer", "optimiser", "optimization", "opt", "scheduler", "lr_scheduler", "schedule",
                  "sched", "solver"},
    "data": {"data", "dataset", "datasets", "datamodule", "loader", "dataloader", "augment", "augmentation",
             "augmentations", "transform", "transforms", "tokenizer", "corpus", "preprocess", "preprocessing",
             "env", "environment"},
    "evaluation": {"eval", "evaluation", "val", "validation", "test"},
    "budget": {"budget"},
}
OPTIMIZER_LEAF = re.compile(r"^(base_|max_|min_|peak_|init_|initial_|final_)?(lr|learning_rate|weight_decay|wd|"
                            r"momentum|nesterov|betas?|beta[12]|adam_(beta[12]|eps|epsilon)|amsgrad|grad_clip|"
                            r"clip_grad(_norm)?|max_grad_norm|gradient_clip(_val)?|warmup(_steps|_iters|_epochs|"
                            r"_ratio|_frac)?|lr_(schedule|decay|min|warmup)\w*|optimizer|optim)$")
BUDGET_LEAF = re.compile(r"^(max_|num_|n_|total_|train_|training_)*(steps|iters|iterations|epochs|epoch|tokens|"
                         r"timesteps|updates|time_limit|time|budget|samples|minutes|hours|steps_per_epoch|"
                         r"batch_size|batch|examples_per_step|grad_accum(ulation)?(_steps)?|accumulate_grad_batches)"
                         r"(_s|_min|_h)?$")
NOT_BUDGET = re.compile(r"(^|_)(eval|evaluation|val|valid|validation|test|log|logging|warmup|ckpt|checkpoint|save|"
                        r"print|decay|schedule|sampler|sampling|generate|generation)(_|$)")
MODEL_WORDS = frozenset({"width", "depth", "layers", "layer", "heads", "head", "hidden", "dim", "dims", "dropout",
                         "activation", "act", "norm", "normalization", "embedding", "embed", "channels", "kernel",
                         "attention", "attn", "encoding", "blocks", "block", "units", "neurons", "arch",
                         "architecture", "model", "init", "initialization", "residual", "bias"})
DATA_WORDS = frozenset({"shuffle", "subset", "limit", "augment", "augmentation", "train", "corpus", "dataset", "data",
                        "split", "noise", "crop", "flip", "tokenizer", "vocab", "context", "seq", "sequence",
                        "window", "classes", "labels", "label", "smoothing"})
_WORD = re.compile(r"[A-Za-z]+")


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text.replace("_", " "))]


def _group_concern(name: str) -> str | None:
    name = name.lower()
    return next((c for c, names in GROUPS.items() if name in names), None)


def concern_of(key: str, swapped: str | None = None) -> str:
    """The concern of a changed run-config key; `swapped`: the config group a group swap chose when that swap
    set the key (see the module docstring for the order of the evidence)."""
    parts = key.split(".")
    leaf = parts[-1].lower()
    words = _words(key)
    if any(w in EVAL_WORDS for w in words) and not any(w in SCHEDULE_WORDS for w in words):
        return "evaluation"
    if OPTIMIZER_LEAF.match(leaf):
        return "optimizer"
    if BUDGET_LEAF.match(leaf) and not any(NOT_BUDGET.search(p.lower()) for p in parts):
        return "budget"
    for folder in parts[:-1]:
        found = _group_concern(folder)
        if found:
            return found
    if swapped and _group_concern(swapped):
        return _group_concern(swapped)
    leaf_words = set(_words(leaf))
    if leaf_words & MODEL_WORDS:
        return "model"
    if leaf_words & DATA_WORDS:
        return "data"
    return "other"


def swap_group(override: str, keys: Iterable[str]) -> str | None:
    """The config group of a declared change that is a group swap (`model=big`, `+dataset=other`, `(no
    data=big)`): the key it sets is not itself one of the keys it changed; None for a plain key override."""
    text = override[4:-1] if override.startswith("(no ") and override.endswith(")") else override
    name = text.split("=", 1)[0].strip().lstrip("+~").split("@", 1)[0]
    if not name or name in set(keys):
        return None
    return name.split("/")[-1]


def by_concern(keys: Iterable[str], declared: Iterable[Declared] = ()) -> dict[str, list[tuple[str, str | None]]]:
    """concern -> [(key, the declared change that made it, or None)], concerns in CONCERNS order, keys in order."""
    made_by: dict[str, str] = {}
    for d in declared:
        for k in d.keys:
            made_by.setdefault(k, d.override)
    groups = {d.override: swap_group(d.override, d.keys) for d in declared}
    found: dict[str, list[tuple[str, str | None]]] = {}
    for key in keys:
        override = made_by.get(key)
        found.setdefault(concern_of(key, groups.get(override) if override else None), []).append((key, override))
    return {c: found[c] for c in CONCERNS if c in found}


def describe_concerns(found: dict[str, list[tuple[str, str | None]]], limit: int = 3) -> str:
    """'model: model.d_model (model=big); optimizer: optim.lr (model=big)'."""
    parts = []
    for concern, keyed in found.items():
        shown = [f"{k} ({o})" if o and o.replace(" ", "") != k and not o.startswith(f"{k}=") else k
                 for k, o in keyed[:limit]]
        parts.append(f"{concern}: {', '.join(shown)}" + (f" +{len(keyed) - limit}" if len(keyed) > limit else ""))
    return "; ".join(parts)
