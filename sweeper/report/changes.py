"""The report's "What each variant changes" section: each variant's resolved config against the baseline's.

    lines = terminal_lines(changes, declared, baseline)     # under the decision table
    md = markdown_section(changes, declared, baseline, experiment)
    columns = summary_columns(changes, declared)            # summary.csv: changes, n_changes, changed_keys

`changes` is variant -> [config_diff.Change] (sweeper.analysis.results.load_variant_changes, from the runs'
config.yaml);
`declared` is variant -> [config_diff.Declared] (recorded in the manifest at plan time by
sweeper.config.variants.ablation).
"""
from __future__ import annotations

from sweeper.analysis.integrity.records.evaluation import evaluation_keys, is_evaluation_key
from sweeper.config.variants.concerns import by_concern
from sweeper.config.variants.config_diff import Change, Declared, describe, group_changes, show


def n_declared(changes: list[Change], declared: list[Declared]) -> int:
    """How many separate changes a variant makes: each declared change that changed a key, plus one for keys no
    declaration names."""
    return len(group_changes(changes, declared))


def terminal_lines(changes: dict[str, list[Change]], declared: dict[str, list[Declared]], baseline: str) -> list[str]:
    if not changes:
        return []
    out = [f"what each variant changes vs {baseline}:"]
    for variant, mine in changes.items():
        flag = ""
        if not mine:
            flag = "  (identical run config: an A/A control)"
        elif n_declared(mine, declared.get(variant, [])) > 1:
            flag = f"  ({n_declared(mine, declared.get(variant, []))} changes)"
        concerns = by_concern([c.key for c in mine], declared.get(variant, []))
        if len(concerns) > 1:             # several concerns at once (integrity: several_concerns)
            flag += f"  ({len(concerns)} concerns: {', '.join(concerns)})"
        evaluated = evaluation_keys(mine)
        if evaluated:                     # the arms are not evaluated on the same data (integrity: evaluation)
            flag += f"  (changes the evaluation: {', '.join(c.key for c in evaluated)})"
        out.append(f"  {variant}: {describe(mine, declared.get(variant, []))}{flag}")
    return out


def markdown_section(changes: dict[str, list[Change]], declared: dict[str, list[Declared]], baseline: str,
                     notes: dict[str, str] | None = None) -> list[str]:
    """Markdown lines: one table row per changed key, grouped under the declared change that made it."""
    if not changes:
        return ["No variant is compared with a baseline (or no run config could be read)."]
    notes = notes or {}
    md = [f"Computed from each variant's resolved run config (config.yaml) against the baseline **{baseline}**; a "
          f"config-group swap is one declared change; each key's concern as docs/sweep-integrity.md says "
          f"(`several_concerns`).", "",
          "| variant | declared change | key | concern | " + baseline + " | variant |", "|---|---|---|---|---|---|"]
    for variant, mine in changes.items():
        if not mine:
            md.append(f"| {variant} | (none: identical run config) | | | | |")
            continue
        concern = {k: c for c, keyed in by_concern([c.key for c in mine], declared.get(variant, [])).items()
                   for k, _ in keyed}
        for override, group in group_changes(mine, declared.get(variant, [])):
            for c in group:
                old = "(absent)" if c.kind == "added" else f"`{show(c.old)}`"
                new = "(absent)" if c.kind == "removed" else f"`{show(c.new)}`"
                key = f"`{c.key}`" + (" (evaluation)" if is_evaluation_key(c.key) else "")
                md.append(f"| {variant} | {_cell(override or '(not declared)')} | {key} | {concern[c.key]} | "
                          f"{_cell(old)} | {_cell(new)} |")
    n = {v: n_declared(c, declared.get(v, [])) for v, c in changes.items()}
    several = [v for v, k in n.items() if k > 1]
    if several:
        md += ["", "Variants with more than one change (their result cannot say which one mattered): "
               + ", ".join(f"{v} ({n[v]})" for v in several) + "."]
    md += [f"- {v}: {line}" for v, line in notes.items() if v in changes or v == baseline]
    return md


def summary_columns(changes: dict[str, list[Change]], declared: dict[str, list[Declared]]) -> dict[str, dict]:
    """variant -> {changes: one line, n_changes, changed_keys: 'a;b'} for summary.csv / the results frame."""
    return {v: {"changes": describe(c, declared.get(v, [])), "n_changes": n_declared(c, declared.get(v, [])),
                "changed_keys": ";".join(x.key for x in c)} for v, c in changes.items()}


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|")
