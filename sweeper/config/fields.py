"""Typed config values: a schema dataclass built from a mapping and checked, and one-line errors for any config value.

    cfg = build(SweeperConf, {"dry_run": True}, "sweeper")     # typed and checked; UsageError naming the key
    explain_validation(e, "train")                             # OmegaConf's error as `train.steps='abc': expected an
    integer`

A schema's fields are declared with sweeper.field_rules (`rule(...)`, `positive`, `one_of`): each carries its
accepted range, so a wrong type and an out-of-range value get the same words. Every schema (sweeper.config.schema,
sweeper.run.files.experiment, the backends' launcher schemas) is built and checked here.
"""
from __future__ import annotations

import math
import re
import sys
import typing
from dataclasses import fields, is_dataclass
from typing import Any, Callable, Dict, List, Optional

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from sweeper.errors import UsageError

MISSING = "???"                                   # OmegaConf's mandatory value


# -- checking a built dataclass against its fields' rules (declared with sweeper.field_rules) --------------

def check_fields(obj: Any, prefix: str, given: dict | None = None) -> None:
    """Every rule(...) field of a built dataclass (the error shows the value as given, when known), and every
    number is finite (inf or nan in any float key is refused, whatever its rule says)."""
    for f in fields(obj):
        value, ok = getattr(obj, f.name), f.metadata.get("ok")
        if ok is not None and value is not None and not ok(value):
            shown = (given or {}).get(f.name, value)
            raise UsageError(f"{prefix}.{f.name}={show(shown)}: {f.metadata['must']}")
        if isinstance(value, float) and not math.isfinite(value):          # a key whose rule forgot it
            raise UsageError(f"{prefix}.{f.name}={value}: must be a finite number (inf and nan are refused)")


def phrase_of(cls: type, key: str) -> str:
    """What a field accepts: its rule's words, or its type's (`expected an integer or null`)."""
    spec = next(f for f in fields(cls) if f.name == key)
    return spec.metadata.get("must") or f"expected {describe(type_hints(cls)[key])}"


def _container(hint: Any) -> type | tuple | None:
    args = [a for a in typing.get_args(hint) if a is not type(None)] if _is_union(hint) else [hint]
    origin = typing.get_origin(args[0]) if len(args) == 1 else None
    if origin in (dict, Dict) or (len(args) == 1 and is_dataclass(args[0])):
        return dict
    return (list, tuple) if origin in (list, List) else None


def _element(hint: Any) -> type | None:
    """The scalar element type of a List[...] field (Optional allowed), else None."""
    args = [a for a in typing.get_args(hint) if a is not type(None)] if _is_union(hint) else [hint]
    if len(args) != 1 or typing.get_origin(args[0]) not in (list, List):
        return None
    inner = typing.get_args(args[0])
    return inner[0] if inner and inner[0] in (bool, int, float, str) else None


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) is typing.Union or type(hint).__name__ == "UnionType"


def build(cls: type, values: Any, prefix: str, label: str = ""):
    """values (a mapping: a composed block, an old manifest's dict, plugin options) as a checked `cls`: unknown
    keys, wrong types and out-of-range values are one-line UsageErrors naming `prefix.key`."""
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise UsageError(f"{prefix}={values!r}: expected a mapping with keys {', '.join(keys_of(cls))}")
    unknown = sorted(set(values) - set(keys_of(cls)))
    if unknown:
        raise UsageError(unknown_key(f"{prefix}.{unknown[0]}", keys_of(cls), label))
    hints = type_hints(cls)
    for key, value in values.items():          # a container of the wrong kind: OmegaConf names no key for it
        kind = _container(hints[key])
        if value is not None and kind and not isinstance(value, kind):
            raise UsageError(f"{prefix}.{key}={show(value)}: {phrase_of(cls, key)}")
        if value is not None and hints[key] in (bool, Optional[bool]) and not isinstance(value, bool):
            raise UsageError(f"{prefix}.{key}={show(value)}: {phrase_of(cls, key)}")   # OmegaConf: 1, 'yes' -> true
    try:
        obj = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls), values))
    except OmegaConfBaseException as e:
        raise UsageError(explain_validation(e, prefix, lambda key: values.get(key.split(".")[0]))) from None
    for key, value in values.items():          # OmegaConf lets a nested list or mapping into a List[int]
        element = _element(hints[key])
        items = getattr(obj, key)
        if element and isinstance(items, (list, tuple)) and not all(
                isinstance(v, element) and not (isinstance(v, bool) and element is not bool) for v in items):
            raise UsageError(f"{prefix}.{key}={show(value)}: {phrase_of(cls, key)}")
    _check_tree(obj, prefix, values)
    return obj


def _check_tree(obj: Any, prefix: str, given: Any) -> None:
    """The rules and check() of a built dataclass and of every dataclass nested in it (sweeper.adaptive.*)."""
    check_fields(obj, prefix, given if isinstance(given, dict) else None)
    for f in fields(obj):
        value = getattr(obj, f.name)
        if is_dataclass(value):
            _check_tree(value, f"{prefix}.{f.name}", (given or {}).get(f.name) if isinstance(given, dict) else None)
    if hasattr(obj, "check"):
        obj.check(prefix)


def keys_of(cls: type) -> list[str]:
    return [f.name for f in fields(cls)]


def unknown_key(key: str, keys: list[str], label: str = "") -> str:
    parent = key.rsplit(".", 1)[0] if "." in key else None
    where = f"keys of {parent}{label}" if parent else "top-level keys"
    return f"unknown config key '{key}'; {where} are: {', '.join(sorted(keys))}" if keys else \
        f"unknown config key '{key}'"


# -- one line for an OmegaConf type or key error ----------------------------------------------------------------

def explain_validation(e: Exception, prefix: str = "", value_of: Callable[[str], Any] | None = None) -> str:
    """`train.steps='abc': expected an integer` from an OmegaConf ValidationError / ConfigKeyError (raised while
    merging into a structured config). value_of(key) gives the value as written (a list for a list element)."""
    key = str(getattr(e, "full_key", "") or "")
    base = re.sub(r"\[\d+\]$", "", key)                       # an element of a list: name the list
    full = ".".join(p for p in (prefix, base) if p)
    owner, name = getattr(e, "object_type", None), getattr(e, "key", None)
    if not (is_dataclass(owner) and isinstance(name, str) and base == key):
        owner, name = _owning_dataclass(getattr(e, "parent_node", None), base.rpartition(".")[2])
    if owner is not None:
        known = keys_of(owner)
        if name not in known:
            return unknown_key(full, known)
        phrase = phrase_of(owner, name)
    else:
        ref, first = getattr(e, "ref_type", None), (str(e).strip().splitlines() or [type(e).__name__])[0]
        kinds = {"Cannot merge DictConfig with ListConfig": "expected a mapping",
                 "Cannot merge ListConfig with DictConfig": "expected a list"}
        phrase = f"expected {describe(ref)}" if ref not in (None, Any) else kinds.get(first, first)
    shown = getattr(e, "value", None) if base == key else None    # the value refused, wherever it was set
    if shown is None and value_of:
        shown = value_of(base)                                    # a list as written, for one of its elements
    return f"{full}={show(shown)}: {phrase}"


def _owning_dataclass(node: Any, name: str) -> tuple[type | None, str]:
    """The structured config (dataclass) above an OmegaConf node that has a field `name` (a list's field)."""
    for _ in range(8):
        if node is None:
            break
        owner = getattr(getattr(node, "_metadata", None), "object_type", None)
        if is_dataclass(owner) and name in keys_of(owner):
            return owner, name
        node = node._get_parent()
    return None, name


def show(value: Any) -> str:
    """A value as it is written in a config: null, true, 'text', [1, 2]."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return repr(value)


def type_hints(cls: type) -> dict:
    return typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))


def describe(hint: Any) -> str:
    """What a type annotation accepts, in words: Optional[List[int]] -> 'a list of integers or null'."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if _is_union(hint):
        rest = [a for a in args if a is not type(None)]
        inner = describe(rest[0]) if len(rest) == 1 else " or ".join(describe(a) for a in rest)
        return inner + (" or null" if len(rest) < len(args) else "")
    if origin in (list, List):
        return f"a list of {_plural(args[0] if args else Any)}"
    if origin in (dict, Dict):
        return f"a mapping of names to {_plural(args[1] if len(args) > 1 else Any)}"
    if is_dataclass(hint):
        return f"a mapping with keys {', '.join(keys_of(hint))}"
    return {bool: "a boolean (true or false)", int: "an integer", float: "a number", str: "a string"}.get(
        hint, "a value")


def _plural(hint: Any) -> str:
    words = {bool: "booleans", int: "integers", float: "numbers", str: "strings"}
    if hint in words:
        return words[hint]
    if typing.get_origin(hint) in (list, List):
        return "lists"
    return "values" if hint is Any else describe(hint).removeprefix("a ").removeprefix("an ") + "s"
