"""The decision metric has its default in one place: an AST scan of sweeper/ and hydra_plugins/ for a metric name
("val_loss", "objective") written as a default (a parameter's default, a dataclass field or class attribute, a
module constant, `.get(key, default)`, `field(default=...)`, a `metric=` keyword, a `"metric":` entry).

    python -m pytest -q -n 0 -p no:cacheprovider tests/test_defaults.py

`python -m sweeper` experiments state their metric (sweeper.run.files.experiment.Experiment has no default for
it); the Hydra plugin's hydra.launcher.metric defaults to "objective" (a task function's return value) in its
options dataclass only; a sweep dir without a manifest is reported on val_loss, named once.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("val_loss", "objective")
# where a default metric name may be written, and why
ALLOWED = {
    ("hydra_plugins/sweeper_pool/_options.py", "Options.metric"),       # hydra.launcher.metric, the plugin's own
    ("sweeper/analysis/results.py", "ASSUMED_WITHOUT_MANIFEST"),        # the report of a dir with no manifest
}


def _named(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in NAMES


def metric_defaults(source: str, rel: str) -> list[tuple[str, str]]:
    """(rel, where) for every metric name written as a default in a module's source."""
    tree = ast.parse(source, filename=rel)
    found = []

    def visit(node: ast.AST, owner: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                for stmt in child.body:
                    target = (stmt.target if isinstance(stmt, ast.AnnAssign) else
                              stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None)
                    if isinstance(target, ast.Name) and stmt.value is not None and _named(stmt.value):
                        found.append((rel, f"{child.name}.{target.id}"))
                visit(child, child.name)
                continue
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                args = child.args
                if any(_named(d) for d in [*args.defaults, *args.kw_defaults] if d is not None):
                    found.append((rel, f"{getattr(child, 'name', 'lambda')}()"))
            if isinstance(child, (ast.Assign, ast.AnnAssign)) and owner == "" and child.value is not None \
                    and _named(child.value):
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                found.extend((rel, t.id) for t in targets if isinstance(t, ast.Name))
            if isinstance(child, ast.Call):
                func = child.func
                if isinstance(func, ast.Attribute) and func.attr in ("get", "setdefault", "pop") \
                        and len(child.args) > 1 and _named(child.args[1]):
                    found.append((rel, f".{func.attr}() at line {child.lineno}"))
                found.extend((rel, f"{k.arg}= at line {child.lineno}") for k in child.keywords
                             if k.arg in ("default", "metric") and _named(k.value))
            if isinstance(child, ast.Dict):
                found.extend((rel, f'"metric": at line {child.lineno}') for k, v in zip(child.keys, child.values)
                             if isinstance(k, ast.Constant) and k.value == "metric" and _named(v))
            visit(child, getattr(child, "name", owner))

    visit(tree, "")
    return found


def test_the_metric_has_no_default_but_the_plugins_option_and_the_no_manifest_assumption():
    found = [hit for folder in ("sweeper", "hydra_plugins") for p in sorted((ROOT / folder).rglob("*.py"))
             for hit in metric_defaults(p.read_text(encoding="utf-8"), p.relative_to(ROOT).as_posix())]
    assert set(found) == ALLOWED and len(found) == len(ALLOWED), \
        "a metric name written as a default (state it once: the experiment names its metric, the plugin's " \
        "Options.metric is hydra.launcher.metric's default):\n" + "\n".join(f"{f}: {w}" for f, w in found)


def test_the_scan_finds_each_kind_of_default():
    """The checker itself: every way of writing a default is found (a scan that finds nothing proves nothing)."""
    source = ('from dataclasses import dataclass, field\n'
              'A = "val_loss"\n'
              '@dataclass\nclass E:\n    metric: str = "val_loss"\n    other: str = field(default="objective")\n'
              'def f(metric="objective"):\n    return {}.get("metric", "val_loss")\n'
              'def g():\n    return dict(metric="val_loss"), {"metric": "objective"}\n')
    found = [w for _, w in metric_defaults(source, "probe.py")]
    assert found == ["A", "E.metric", "default= at line 6", "f()", ".get() at line 8", "metric= at line 10",
                     '"metric": at line 10'], found
