"""What a variant changes, from resolved run configs: keys added, removed and changed, with their values.

    changes = diff_configs(baseline_config, variant_config)   # [Change('model.pos_encoding', 'rope', 'none')]
    [str(c) for c in changes]                                 # ['model.pos_encoding: rope -> none']
    group_changes(changes, declared)                          # which declared change (override) made which keys

Configs are nested mappings (a run's config.yaml); lists are compared whole (a list is one value). `seed` is
never a change: every run has its own. Pure functions on plain data: the report path uses them without torch or
Hydra; the plan-time check (sweeper.config.variants.ablation) attributes keys to the overrides that made them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

MISSING = object()
IGNORED = frozenset({"seed"})


def flatten(cfg: Any, prefix: str = "") -> dict[str, Any]:
    """{'model': {'d': 64}} -> {'model.d': 64}; an empty mapping stays a value ({} under its key)."""
    if not isinstance(cfg, dict) or (prefix and not cfg):
        return {prefix: cfg}
    out: dict[str, Any] = {}
    for key, value in cfg.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


@dataclass(frozen=True)
class Change:
    key: str
    old: Any = MISSING      # MISSING: the key is added
    new: Any = MISSING      # MISSING: the key is removed

    @property
    def kind(self) -> str:
        return "added" if self.old is MISSING else "removed" if self.new is MISSING else "changed"

    def __str__(self) -> str:
        if self.kind == "added":
            return f"+{self.key}: {show(self.new)}"
        if self.kind == "removed":
            return f"-{self.key} (was {show(self.old)})"
        return f"{self.key}: {show(self.old)} -> {show(self.new)}"

    def to_dict(self) -> dict:
        return {"key": self.key, "kind": self.kind, **({} if self.old is MISSING else {"old": self.old}),
                **({} if self.new is MISSING else {"new": self.new})}


def show(value: Any) -> str:
    """A value as the user wrote it in YAML: none, true, 0.001, [1, 2], 'text'."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return value if value and value.strip() == value and value.lower() not in ("null", "true", "false") \
            else repr(value)
    return str(value)


def diff_configs(base: dict, other: dict) -> list[Change]:
    """Every key that differs between two run configs, in the order of `base` then `other`'s new keys."""
    a, b = flatten(base or {}), flatten(other or {})
    changes = []
    for key in list(a) + [k for k in b if k not in a]:
        if key in IGNORED:
            continue
        old, new = a.get(key, MISSING), b.get(key, MISSING)
        if not _same(old, new):
            changes.append(Change(key, old, new))
    return changes


def _same(x: Any, y: Any) -> bool:
    """Equal as config values: 1 and 1.0 differ (a YAML int is not a float), True and 1 differ."""
    return type(x) is type(y) and x == y


@dataclass(frozen=True)
class Declared:
    """One declared change (an override, or a group swap) and the keys it changed."""
    override: str
    keys: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"override": self.override, "keys": list(self.keys)}

    @classmethod
    def from_dict(cls, d: dict) -> "Declared":
        return cls(str(d["override"]), tuple(str(k) for k in d.get("keys") or ()))


def group_changes(changes: Iterable[Change], declared: Iterable[Declared]) -> list[tuple[str | None, list[Change]]]:
    """Changes grouped under the declared change that made them, in declaration order; keys no declaration
    names come last under None (e.g. a value interpolated from a changed key)."""
    changes = list(changes)
    by_key = {c.key: c for c in changes}
    groups, seen = [], set()
    for d in declared:
        mine = [by_key[k] for k in d.keys if k in by_key and k not in seen]
        seen.update(c.key for c in mine)
        if mine:
            groups.append((d.override, mine))
    rest = [c for c in changes if c.key not in seen]
    if rest:
        groups.append((None, rest))
    return groups


def describe(changes: list[Change], declared: Iterable[Declared] = (), limit: int = 6) -> str:
    """One line: 'model.pos_encoding: rope -> none'; a group swap: 'model=big (3 keys: a: 1 -> 2, ...)'."""
    if not changes:
        return "no change"
    parts = []
    for override, group in group_changes(changes, declared):
        shown = ", ".join(str(c) for c in group[:limit]) + (f", ... (+{len(group) - limit})" if len(group) > limit
                                                            else "")
        if override is None or (len(group) == 1 and override.replace(" ", "") == _as_override(group[0])):
            parts.append(shown)
        else:
            parts.append(f"{override} ({len(group)} key{'s' if len(group) != 1 else ''}: {shown})")
    return "; ".join(parts)


def _as_override(c: Change) -> str:
    return f"{c.key}={show(c.new)}" if c.kind != "removed" else f"~{c.key}"
