"""Hydra's and OmegaConf's errors as one line naming the override and what is accepted.

    raise UsageError(explain_hydra_error(e, overrides, compose_raw))   # compose_raw: composes, raises as Hydra does
"""
from __future__ import annotations

import errno
import re
from typing import Any, Callable

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf.errors import ConfigKeyError, ConfigTypeError, ValidationError

from sweeper.config.composition.argv import key_of, override_value
from sweeper.config.composition.search import available, experiment_file, search_dirs, where_searched
from sweeper.config.fields import explain_validation
from sweeper.config.names import MAX_NAME, NAME_MAX, shorten
from sweeper.errors import chain as _chain
from sweeper.errors import yaml_problem


def package_hint(overrides: list[str]) -> str | None:
    """Why an experiment file's keys landed under experiment.*: its first line lacks `# @package _global_`."""
    path = experiment_file(overrides)
    if path is None:
        return None
    try:
        head = path.read_text(encoding="utf-8", errors="replace")[:2000]
    except OSError:
        return None
    if re.search(r"^#\s*@package\s+_global_\s*$", head, re.M):
        return None
    return (f"{path} has no `# @package _global_` line: an experiment file starts with it (without it, its "
            f"defaults and keys land under experiment.*); add it as the first line")


def explain_hydra_error(e: Exception, overrides: list[str], compose_raw: Callable[[list[str]], Any]) -> str:
    """One line for an error Hydra raised composing `overrides` (compose_raw composes again, for the keys a
    section has, when a key is unknown)."""
    msg, name = str(e), type(e).__name__
    line = yaml_problem(e)
    if line is not None:
        return line
    if any(isinstance(c, OSError) and c.errno == errno.ENAMETOOLONG for c in _chain(e)):
        key = max((key_of(o) for o in overrides), key=lambda k: max(map(len, re.split(r"[./]", k))), default="")
        part = max(re.split(r"[./]", key), key=len) if key else ""
        return (f"{shorten(key)}: the name {shorten(part)} has {len(part)} characters, more than a file system "
                f"allows in one name ({NAME_MAX}); names (experiment, variants) have at most {MAX_NAME}")
    decode = next((c for c in _chain(e) if isinstance(c, UnicodeDecodeError)), None)
    if decode is not None:
        return f"{not_text_file(decode, overrides)} is not UTF-8 text ({decode.reason} at offset {decode.start}); " \
               f"save it as UTF-8"
    if re.search(r"Could not override '[^']*@experiment\.", msg):
        hint = package_hint(overrides)
        if hint:
            return hint
    m = re.match(r"Ambiguous value for argument '([^'=]+)=([^\n]*)'", msg)
    if m:
        key, value = m.groups()
        return (f"{key}={value}: a comma-separated value is a Hydra sweep, which python -m sweeper does not run "
                f"(variants go in the experiment); write a list as {key}=[{value}] or a string as {key}='{value}'")
    cause = _omegaconf_cause(e)
    if cause is not None:
        line = explain_validation(cause, value_of=lambda key: override_value(key, overrides))
        key = str(getattr(cause, "full_key", "") or "")
        given = {key_of(o) for o in overrides}
        refused, typed = getattr(cause, "value", None), override_value(key, overrides)
        from_file = key in given and (type(refused) is not type(typed) or refused != typed)   # 1 == True
        return f"{line} (set in a config file)" if from_file or re.sub(r"\[\d+\]$", "", key) not in given else line
    if msg.startswith("Config group override must be a string or a list"):
        return _group_value(overrides) or msg.strip().splitlines()[0]
    m = re.search(r"Could not find '([^']+)/([^'/]+)'", msg)
    if m:
        group, option = m.groups()
        group = group.strip("/")
        listed = re.search(r"Available options in '[^']*':\n((?:\t.*\n?)*)", msg)
        options = [o.strip() for o in listed.group(1).splitlines() if o.strip()] if listed \
            else available(group, overrides)
        what = "experiments" if group == "experiment" else f"{group} configs"
        kind = "experiment" if group == "experiment" else group
        return (f"unknown {kind} '{option}': available {what} are {', '.join(options) or 'none'} "
                f"({where_searched(overrides)})")
    m = re.search(r"Could not override '([^']+)'", msg)
    if m:
        key = m.group(1)
        if key == "experiment":
            return (f"experiment is added with a plus: +experiment=NAME (available: "
                    f"{', '.join(available('experiment', overrides))})")
        parent = key.rsplit(".", 1)[0] if "." in key else None
        keys = _keys_at(parent, [o for o in overrides if key_of(o) != key], compose_raw)
        where = f"keys of {parent}" if parent else "top-level keys"
        return f"unknown config key '{key}'; {where} are: {', '.join(keys)}" if keys else f"unknown config key '{key}'"
    if name == "OverrideParseException":
        bad = next((o for o in overrides if o.split("=")[0].strip() and o in msg), None)
        bad = bad or re.search(r"override '([^']*)'", msg)
        bad = bad.group(1) if isinstance(bad, re.Match) else bad
        bad = next((o for o in overrides if key_of(o).startswith("experiment.variants.") and not _parses(o)), bad)
        if bad and key_of(bad).startswith("experiment.variants."):
            return (f"malformed override {bad!r}: a variant is a list of quoted overrides, e.g. "
                    f"'+experiment.variants.NAME=[\"key=value\",\"other.key=value\"]' (the outer quotes for the shell)")
        return f"malformed override {bad!r}: expected key=value (e.g. train.steps=100, seeds=[0,2,5])" if bad \
            else f"malformed override: expected key=value; {msg.splitlines()[0]}"
    if "mandatory value" in msg.lower() or "MissingMandatoryValue" in name:
        m = re.search(r"full_key: (\S+)", msg)
        return missing_message(m.group(1) if m else "a required key")
    return msg.strip().splitlines()[0] if msg.strip() else name


def _parses(override: str) -> bool:
    try:
        OverridesParser.create().parse_overrides([override])
    except Exception:  # noqa: BLE001 - Hydra's parser raises its own types
        return False
    return True


def _group_value(overrides: list[str]) -> str | None:
    """`model=42`: a config group given a value that is no config name (a number, a bool, null, a mapping)."""
    for override in overrides:
        key, value = key_of(override), override_value(key_of(override), [override])
        options = available(key, overrides) if "=" in override and not isinstance(value, (str, list)) else []
        if options:
            return (f"{override.split('=', 1)[0].lstrip('+~')}={override.split('=', 1)[1]}: {key} is a config group: "
                    f"give one of its configs by name: {', '.join(options)} ({where_searched(overrides)})")
    return None


def _omegaconf_cause(e: BaseException):
    """The OmegaConf type or key error behind a Hydra error (a value merged into a structured config), if any."""
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, (ValidationError, ConfigKeyError, ConfigTypeError)) and getattr(e, "full_key", None):
            return e
        e, seen = e.__cause__ or e.__context__, seen + 1
    return None


def _keys_at(section: str | None, overrides: list[str], compose_raw: Callable[[list[str]], Any]) -> list[str]:
    """The keys a config section has once composed without the offending override ([] if that fails too)."""
    try:
        node: Any = compose_raw(overrides)
    except Exception:  # noqa: BLE001 - only a hint for an error message
        return []
    for part in section.split(".") if section else []:
        node = node.get(part) if isinstance(node, dict) else None
    return sorted(k for k in node if not (section is None and k == "hydra")) if isinstance(node, dict) else []


def not_text_file(e: UnicodeDecodeError, overrides: list[str]) -> str:
    """The config file that is not UTF-8: the experiment's, else the first of the search dirs' YAML files that
    does not decode (Hydra's error does not name it)."""
    candidates = [experiment_file(overrides)] + [
        p for d in search_dirs(overrides)[1:] for p in sorted(d.rglob("*.yaml"))[:500]
    ]
    for path in candidates:
        try:
            if path is not None:
                path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            return str(path)
        except OSError:
            continue
    return "a config file"


def missing_message(key: str) -> str:
    return f"{key} is required (it is ??? in the config): set it on the command line, e.g. {key}=VALUE"
