"""The layers of the code base, checked on the import graph (every import statement, lazy ones included).

    kernels < sweeper.health < sweeper.run (the run contract) < train < sweeper (orchestrator) < hydra_plugins

A module may import only from its own layer or a lower one; the report path reads files only (no backend, no
train, no torch, checked in a clean interpreter too); only the run contract spells the names of its files.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kernels", "sweeper", "train", "hydra_plugins")
ORDER = ("kernels", "health", "run", "train", "sweeper", "hydra_plugins")
REPORT_PATH = ("sweeper.report", "sweeper.report_html", "sweeper.results", "sweeper.stats", "sweeper.verdict", "sweeper.plots",
               "sweeper.compare")
NOT_ON_REPORT_PATH = ("sweeper.slurm", "sweeper.slurm_task", "sweeper.local", "sweeper.pool", "train", "torch",
                      "submitit", "kernels")
CONTRACT_FILES = ("status.json", "summary.json", "metrics.jsonl", "sweep.json")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str | None:
    top = module.split(".")[0]
    if top not in PACKAGES:
        return None
    if module == "sweeper.health" or module.startswith("sweeper.health."):
        return "health"
    if module == "sweeper.run" or module.startswith("sweeper.run."):
        return "run"
    return top


def imports_of(path: Path, top_level_only: bool = False) -> list[tuple[str, int]]:
    """(imported module, line) for every import in the file (or only those run at import time); relative
    imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    out = []
    for node in (tree.body if top_level_only else ast.walk(tree)):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.append((target, node.lineno))
            out += [(f"{target}.{alias.name}", node.lineno) for alias in node.names]   # from pkg import module
    return out


def our_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


MODULES = {module_name(p): p for p in our_files()}


def graph(top_level_only: bool = False) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (a name that is an attribute, not a module, is dropped)."""
    return {m: {t for t, _ in imports_of(p, top_level_only) if t in MODULES} for m, p in MODULES.items()}


def test_every_import_goes_to_the_same_or_a_lower_layer():
    bad = []
    for module, path in MODULES.items():
        mine = layer(module)
        for target, line in imports_of(path):
            theirs = layer(target)
            if theirs is None or target == "sweeper":     # outside our code, or the light package root
                continue
            if ORDER.index(theirs) > ORDER.index(mine):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {mine} layer imports {target} ({theirs} layer)")
    assert not bad, "imports against the layers:\n" + "\n".join(bad)


def test_no_import_cycle_between_modules_at_import_time():
    """Layers already forbid cycles between layers; inside one, no two modules import each other at import
    time (a lazy import inside a function is how a module reaches a sibling that imports it)."""
    g = graph(top_level_only=True)
    index, low, stack, on_stack, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:               # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            packages_only = all(MODULES[c].name == "__init__.py" or c == v for c in comp)
            if len(comp) > 1 and not packages_only:
                cycles.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in g:
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_the_report_path_reaches_no_backend_no_train_no_torch():
    g = graph()
    seen, todo = set(), list(REPORT_PATH)
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo += g.get(m, ())
    bad = []
    for m in sorted(seen):
        for target, line in imports_of(MODULES[m]):
            if any(target == x or target.startswith(x + ".") for x in NOT_ON_REPORT_PATH):
                bad.append(f"{MODULES[m].relative_to(ROOT)}:{line} imports {target}")
    assert not bad, "the report path must read files only:\n" + "\n".join(bad)


def test_the_report_imports_in_a_clean_interpreter_without_torch():
    code = ("import sys\nimport sweeper.report, sweeper.results, sweeper.compare\n"
            f"print(sorted(m for m in {NOT_ON_REPORT_PATH!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("package", ["sweeper", "train"])
def test_only_the_run_contract_names_its_files(package):
    owner = ROOT / "sweeper" / "run" / "rundir.py"
    bad = [f"{p.relative_to(ROOT)}:{i}: {name}" for p in sorted((ROOT / package).rglob("*.py")) if p != owner
           for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
           for name in CONTRACT_FILES if name in line]
    assert not bad, "only sweeper/run/rundir.py may name the run contract's files:\n" + "\n".join(bad)


def test_a_layer_violation_is_caught(tmp_path):
    """The checker itself: a kernels module importing train is reported with its file and line."""
    fake = ROOT / "kernels" / "_layer_probe.py"
    fake.write_text("def f():\n    import train.loop\n")
    try:
        MODULES[module_name(fake)] = fake
        with pytest.raises(AssertionError, match=r"kernels/_layer_probe.py:2: kernels layer imports train.loop"):
            test_every_import_goes_to_the_same_or_a_lower_layer()
    finally:
        MODULES.pop(module_name(fake), None)
        fake.unlink()
