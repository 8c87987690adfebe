"""A task.command that hands a script to a shell (`[bash, -c, "python t.py --label {label}"]`): every value
substituted into that script is quoted for the place it stands, so the shell passes it on as data and never runs
it (`x; touch PWNED` stays one argument). docs/security.md states the rule.

    words = ["bash", "-c", "python t.py --label {label}"]
    script_index(words)                                                      # 2: the word bash runs
    quote_in_script(words[2], PLACEHOLDER, lambda m: "x; touch PWNED")       # "python t.py --label 'x; touch PWNED'"

The script of a shell is the word after `-c` (or a flag group holding c, such as `-ec`) that follows a word whose
name is a shell (sh, bash, dash, zsh, ksh, mksh, ash, busybox sh), wherever it stands (`env bash -c ...`,
`timeout 60 sh -c ...`). In that word a value outside quotes is shlex.quote'd; inside "double quotes" its
backslash, $, ` and " are escaped; inside 'single quotes' each ' becomes '\\''. Every other word of the command is
one argument of a program (no shell reads it): the value goes in as it is.
"""
from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable

SHELLS = ("sh", "bash", "dash", "zsh", "ksh", "mksh", "ash")
SCRIPT_FLAG = re.compile(r"^-[A-Za-z]*c[A-Za-z]*$")


def script_index(words: list[str] | tuple[str, ...]) -> int | None:
    """The index of the word a shell runs as its script (after `SHELL -c`), None when no shell reads one."""
    for i, word in enumerate(words[:-2]):
        name = os.path.basename(word)
        if name in SHELLS or (name == "busybox" and words[i + 1] in SHELLS):
            j = i + 2 if name == "busybox" else i + 1
            if j + 1 < len(words) and SCRIPT_FLAG.match(words[j]):
                return j + 1
    return None


def quote_in_script(script: str, pattern: re.Pattern, value_of: Callable[[re.Match], str | None]) -> str:
    """`script` with each match of `pattern` replaced by value_of(match) (None: left as it is), quoted for the
    shell quoting context the match stands in."""
    out, pos, state = [], 0, _contexts(script)
    for m in pattern.finditer(script):
        value = value_of(m)
        out.append(script[pos:m.start()])
        out.append(m.group(0) if value is None else _quote(value, state[m.start()]))
        pos = m.end()
    out.append(script[pos:])
    return "".join(out)


def _quote(value: str, context: str) -> str:
    if context == "'":
        return value.replace("'", "'\\''")
    if context == '"':
        return re.sub(r'([\\$`"])', r"\\\1", value)
    return shlex.quote(value)


def _contexts(script: str) -> list[str]:
    """For each character of the script: the quoting it stands in ('' none, "'" single, '"' double)."""
    state, out, i = "", [], 0
    while i < len(script):
        c = script[i]
        out.append(state)
        if state == "'":
            state = "" if c == "'" else state
        elif c == "\\" and i + 1 < len(script):
            out.append(state)
            i += 1
        elif state == '"':
            state = "" if c == '"' else state
        elif c in "'\"":
            state = c
        i += 1
    return out
