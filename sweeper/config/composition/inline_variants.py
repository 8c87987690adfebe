"""A variant given on the command line: `+experiment.variants.lr1e2=[learning_rate=0.01]` works as typed.

    quote_inline_variants(["+experiment.variants.lr1e2=[learning_rate=0.01,model.width=32]"])
    # -> ['+experiment.variants.lr1e2=["learning_rate=0.01","model.width=32"]']

Each item of a variant is itself an override (`key=value`), which Hydra's grammar does not take unquoted inside
a list (`no viable alternative at input '[learning_rate='`). Every unquoted item of such a list is quoted here,
before composing; items already quoted, and nested lists inside an item (`tags=[a,b]`), are kept whole.
"""
from __future__ import annotations

from sweeper.config.composition.argv import key_of

PREFIX = "experiment.variants."


def quote_inline_variants(overrides: list[str]) -> list[str]:
    """The overrides with the items of each `experiment.variants.NAME=[...]` list quoted (see the docstring)."""
    return [_quoted_list(o) if key_of(o).startswith(PREFIX) and "=" in o else o for o in overrides]


def _quoted_list(override: str) -> str:
    head, value = override.split("=", 1)
    value = value.strip()
    if not (value.startswith("[") and value.endswith("]")):
        return override
    items = _split_top(value[1:-1])
    if not any("=" in item and not _is_quoted(item) for item in items):
        return override
    quoted = [item if _is_quoted(item) else '"' + item.replace('"', '\\"') + '"' for item in items]
    return f"{head}=[{','.join(quoted)}]"


def _is_quoted(item: str) -> bool:
    return len(item) >= 2 and item[0] == item[-1] and item[0] in "'\""


def _split_top(text: str) -> list[str]:
    """Items separated by commas outside brackets and quotes, stripped; empty items dropped."""
    items, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote and text[i - 1] != "\\" else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]
