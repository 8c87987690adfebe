"""The layers of the code base, checked on the import graph: every import statement, those inside functions too.

    kernels < health < errors, interrupts, field_rules, docstrings, pasted, undecodable < run < train < config < plan
            < store < backends < analysis < report < execute < adaptive < cli < the command names (sweeper.resume, ...)
            < hydra_plugins

A module's layer is its folder (sweeper/config/... is `config`; a __main__ is a command's name); the demo trainer and
the kernels install as
sweeper.train and sweeper.kernels from the repo's train/ and kernels/. A module may import only from its own
layer or a lower one, no two modules import each other (directly or round a circle: 0 circles, imports inside
functions counted), an import inside a function says why on its line or the line above (it defers a heavy
dependency), the report path reads files only (no backend, no train, no torch), and only the run contract
spells the names of its files. No folder holds more than 12 modules (MAX_MODULES).
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# repo folder -> the package it installs as
FOLDERS = {"sweeper": "sweeper", "train": "sweeper.train", "kernels": "sweeper.kernels",
           "hydra_plugins": "hydra_plugins"}
ORDER = ("kernels", "health", "base", "run", "train", "config", "plan", "store", "backends", "analysis", "report",
         "execute", "adaptive", "cli", "commands", "hydra_plugins")
BASE = ("sweeper.errors", "sweeper.interrupts", "sweeper.field_rules", "sweeper.docstrings",
        "sweeper.pasted", "sweeper.undecodable")
REPORT_PATH = ("sweeper.report.write", "sweeper.report.html", "sweeper.analysis.results", "sweeper.analysis.stats",
               "sweeper.analysis.verdict", "sweeper.report.plots", "sweeper.analysis.compare", "sweeper.cli.report")
NOT_ON_REPORT_PATH = ("sweeper.backends", "sweeper.train", "torch", "submitit", "sweeper.kernels", "hydra")
CONTRACT_FILES = ("status.json", "summary.json", "metrics.jsonl", "sweep.json")
# why an import may sit inside a function: words one of which the comment beside it must use
REASONS = ("heavy", "defer", "lazy", "only when", "only if", "optional", "plugin", "import time", "startup",
           "slow", "cold", "fresh", "torch", "hydra", "submitit", "pandas", "scipy", "matplotlib", "numpy",
           "triton", "tensorboard", "playwright", "child", "fork")


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = FOLDERS[rel.parts[0]].split(".") + list(rel.parts[1:])
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "hydra_plugins":
        return "hydra_plugins"
    if parts[0] != "sweeper":
        return None
    if any(module == b or module.startswith(b + ".") for b in BASE):
        return "base"
    commands = ("__main__", "resume", "audit", "journal", "slurm", "gc")
    if len(parts) == 1 or parts[1] in commands or parts[-1] == "__main__":
        return "commands" if len(parts) > 1 else None        # the light package root is everyone's
    return parts[1] if parts[1] in ORDER else "unknown"


def imports_of(path: Path, top_level_only: bool = False) -> list[tuple[str, int, bool]]:
    """(imported module, line, inside a function) for every import in the file; relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    top = {id(n) for n in tree.body}
    top |= {id(c) for n in tree.body if isinstance(n, (ast.If, ast.Try)) for c in ast.walk(n)}   # guarded imports
    out = []
    for node in (tree.body if top_level_only else ast.walk(tree)):
        nested = id(node) not in top
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno, nested) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.append((target, node.lineno, nested))
            out += [(f"{target}.{alias.name}", node.lineno, nested) for alias in node.names]   # from pkg import module
    return out


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def our_files() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


MODULES = {module_name(p): p for p in our_files()}


def graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (a name that is an attribute, not a module, is dropped; an
    import of a package's own parent packages is not an edge: Python runs them first anyway)."""
    g = {}
    for m, p in MODULES.items():
        g[m] = {t for t, _, _ in imports_of(p) if t in MODULES and t != m and not m.startswith(t + ".")}
    return g


def cycles_of(g: dict[str, set[str]]) -> list[list[str]]:
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
            if len(comp) > 1:
                cycles.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in g:
        if v not in index:
            visit(v)
    return cycles


def test_every_module_has_a_known_layer():
    unknown = [m for m in MODULES if layer(m) == "unknown"]
    assert not unknown, f"modules in a folder that is no layer (add it to ORDER): {unknown}"


MAX_MODULES = 12     # a folder a reader takes in at a glance (issue 47); __init__ and __main__ not counted


def oversized_folders(roots: list[Path]) -> list[str]:
    """Every package folder under `roots` holding more than MAX_MODULES modules, with its count."""
    out = []
    for folder in sorted({p.parent for root in roots for p in root.rglob("*.py")}):
        n = sum(1 for p in folder.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
        if n > MAX_MODULES:
            out.append(f"{rel(folder)}: {n} modules")
    return out


def test_no_folder_holds_more_than_12_modules():
    """One concept a folder: a folder that grows past MAX_MODULES splits into subfolders by what its modules do
    (as run/observed, config/variants, analysis/integrity/numbers and records did), whole files moved."""
    bad = oversized_folders([ROOT / folder for folder in FOLDERS])
    assert not bad, f"folders over {MAX_MODULES} modules (split them by concept):\n" + "\n".join(bad)


def test_an_oversized_folder_is_caught(tmp_path):
    for i in range(MAX_MODULES + 1):
        (tmp_path / "pkg" / "sub").mkdir(parents=True, exist_ok=True)
        (tmp_path / "pkg" / f"m{i}.py").write_text("")
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub" / "a.py").write_text("")
    assert oversized_folders([tmp_path / "pkg"]) == [f"pkg: {MAX_MODULES + 1} modules"]


def test_every_import_goes_to_the_same_or_a_lower_layer():
    bad = []
    for module, path in MODULES.items():
        mine = layer(module)
        if mine is None:
            continue
        for target, line, _ in imports_of(path):
            theirs = layer(target)
            if theirs is None or target == "sweeper":     # outside our code, or the light package root
                continue
            if ORDER.index(theirs) > ORDER.index(mine):
                bad.append(f"{rel(path)}:{line}: {mine} layer imports {target} ({theirs} layer)")
    assert not bad, "imports against the layers:\n" + "\n".join(bad)


def test_no_import_circle_counting_imports_inside_functions():
    assert not cycles_of(graph()), f"import circles: {cycles_of(graph())}"


def test_an_import_inside_a_function_says_why():
    bad = []
    for module, path in MODULES.items():
        lines = path.read_text(encoding="utf-8").splitlines()
        for target, line, nested in imports_of(path):
            if not nested:
                continue
            near = " ".join(lines[max(0, line - 3):line]).lower()
            if "#" not in near or not any(word in near for word in REASONS):
                bad.append(f"{rel(path)}:{line}: import {target} inside a function, no reason given")
    assert not bad, ("an import inside a function must defer a heavy dependency and say so in a comment on its "
                     "line or the two above:\n" + "\n".join(sorted(set(bad))))


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
        for target, line, _ in imports_of(MODULES[m]):
            if any(target == x or target.startswith(x + ".") for x in NOT_ON_REPORT_PATH):
                bad.append(f"{rel(MODULES[m])}:{line} imports {target}")
    assert not bad, "the report path must read files only:\n" + "\n".join(bad)


def test_the_report_imports_in_a_clean_interpreter_without_torch():
    code = ("import sys\nimport sweeper.report.write, sweeper.analysis.results, sweeper.analysis.compare\n"
            f"print(sorted(m for m in {NOT_ON_REPORT_PATH!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("folder", ["sweeper", "train"])
def test_only_the_run_contract_names_its_files(folder):
    owners = {ROOT / "sweeper" / "run" / "files" / "rundir.py", ROOT / "sweeper" / "run" / "files" / "manifest.py"}
    bad = [f"{p.relative_to(ROOT)}:{i}: {name}" for p in sorted((ROOT / folder).rglob("*.py")) if p not in owners
           for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
           for name in CONTRACT_FILES if name in line]
    assert not bad, "only the run contract (sweeper/run/) may name its files:\n" + "\n".join(bad)


CONFIG_NAMES = re.compile(r"(cfg|conf|config)$", re.IGNORECASE)   # cfg, vcfg, sweep.cfg, run_config, self.conf


def raw_seeds_reads(path: Path) -> list[str]:
    """`cfg["seeds"]` and `cfg.get("seeds")` off a config (a name or attribute ending in cfg/conf/config) in a
    file. Records of other formats with a "seeds" key (a journal row, an adaptive look) are not the config."""
    out, text = [], path.read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(text, filename=str(path))) if "seeds" in text else ():
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == "seeds":
            target = node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "seeds"):
            target = node.func.value
        else:
            continue
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if CONFIG_NAMES.search(name):
            out.append(f"{rel(path)}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_seeds_is_read_raw_only_in_the_config_layer():
    """Issue 41: `seeds=` is one typed value (sweeper.config.seeds.Seeds), parsed once by compose_sweep;
    everything downstream reads sweep.seeds / sweep.variant_seeds, never the raw config key."""
    config = ROOT / "sweeper" / "config"
    bad = [hit for p in MODULES.values() if not p.is_relative_to(config) for hit in raw_seeds_reads(p)]
    assert not bad, "raw reads of the seeds key outside sweeper/config (use sweep.seeds):\n" + "\n".join(bad)


def test_a_raw_seeds_read_is_caught(tmp_path):
    probe = tmp_path / "seeds_probe.py"
    probe.write_text('def f(sweep, rec, row, vcfg):\n    a = rec["looks"][-1]["seeds"], row.get("seeds")\n'
                     '    return sweep.cfg["seeds"], vcfg.get("seeds")\n')
    assert raw_seeds_reads(probe) == ["seeds_probe.py:3: sweep.cfg['seeds']", "seeds_probe.py:3: vcfg.get('seeds')"]


def _with_probe(monkeypatch, tmp_path, name: str, source: str) -> Path:
    """A fake module of ours (written to tmp_path, registered under `name`) for testing the checkers."""
    probe = tmp_path / (name.rpartition(".")[2] + ".py")
    probe.write_text(source)
    monkeypatch.setitem(MODULES, name, probe)
    monkeypatch.setattr(sys.modules[__name__], "module_name",
                        lambda p, _orig=module_name: name if p == probe else _orig(p))
    return probe


def test_a_layer_violation_is_caught(monkeypatch, tmp_path):
    """The checker itself: a kernels module importing the trainer is reported with its line."""
    _with_probe(monkeypatch, tmp_path, "sweeper.kernels._probe", "def f():\n    import sweeper.train.loop\n")
    with pytest.raises(AssertionError, match=r"_probe.py:2: kernels layer imports sweeper.train.loop"):
        test_every_import_goes_to_the_same_or_a_lower_layer()


@pytest.mark.slow
def test_a_circle_through_an_import_inside_a_function_is_caught(monkeypatch, tmp_path):
    """Two modules of one layer importing each other, one of them lazily, is a circle."""
    _with_probe(monkeypatch, tmp_path, "sweeper.config.seeds_probe",
                "import sweeper.config.task\n")
    _with_probe(monkeypatch, tmp_path, "sweeper.config.task_probe",
                "def f():\n    import sweeper.config.seeds_probe  # heavy\n")
    monkeypatch.setitem(MODULES, "sweeper.config.task", MODULES["sweeper.config.task_probe"])
    with pytest.raises(AssertionError, match="import circles"):
        test_no_import_circle_counting_imports_inside_functions()


def test_an_unexplained_lazy_import_is_caught(monkeypatch, tmp_path):
    _with_probe(monkeypatch, tmp_path, "sweeper.config.lazy_probe", "def f():\n    import json\n")
    with pytest.raises(AssertionError, match=r"lazy_probe.py:2: import json inside a function"):
        test_an_import_inside_a_function_says_why()


@pytest.mark.slow
@pytest.mark.parametrize("module, heavy", [
    ("sweeper.cli.sweep", ("torch", "pandas", "scipy", "matplotlib", "triton", "submitit")),   # answers bad input fast
    ("sweeper.cli.resume", ("torch", "pandas", "scipy", "matplotlib", "triton", "submitit")),
    ("sweeper.run", ("torch", "numpy", "pandas", "hydra")),            # the run API a user's script imports
    ("sweeper.train", ("torch",)),                                    # the plan-time hooks of the built-in trainer
    ("sweeper.kernels", ("triton",)),                                 # triton only on the GPU kernel path
    ("sweeper.health", ("torch",)),                                   # names resolved on first use
])
def test_what_a_module_imports_at_import_time(module, heavy):
    """Deferred imports stay deferred: a clean interpreter importing `module` loads none of `heavy`."""
    code = f"import sys, {module}\nprint(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"importing {module} loads {out.stdout.strip()}"
