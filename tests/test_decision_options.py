"""One decision-options value from the config to the verdict, its defaults stated once; the manifest read once per
report.

    python -m pytest -q -n 0 -p no:cacheprovider tests/test_decision_options.py
"""
from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

import sweeper.run.files.manifest as manifest_mod
from sweeper.config.decision import DecisionOptions, ReportFlags
from sweeper.config.schema import SweeperConf
from sweeper.errors import UsageError
from sweeper.execute.end import finish
from sweeper.report.write import compare_sweeps, report_sweep
from tests.helpers.commands import ROOT, run_sweeper
from tests.helpers.synthetic_sweep import write_sweep

HOME = ROOT / "sweeper" / "config" / "decision.py"          # the one place the defaults are stated
DEFAULTS = {f.name: f.default for f in dataclasses.fields(DecisionOptions)}
NAMES = {"alpha", "min_seeds", "n_resamples", "resamples", "confidence"}   # `seed` is also a run's seed: by value
FLAGS = {"--alpha", "--min-seeds", "--resamples", "--seed"}
FAST = DecisionOptions(n_resamples=200)
FLAG_OF = {"alpha": "--alpha", "min_seeds": "--min-seeds", "n_resamples": "--resamples", "seed": "--seed"}


def _number(node) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)


def restated_defaults(tree: ast.AST, decision_path: bool = True) -> list[tuple[int, str]]:
    """(line, what) for every decision default stated in code: a numeric default of a parameter named like an
    option, a class field or keyword argument set to an option's default value, an argparse default of a
    decision flag. decision_path=False: a module off the report's path, where `seed` is a run's seed."""
    names = NAMES | ({"seed"} if decision_path else set())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args.posonlyargs + node.args.args
            pairs = list(zip(args[len(args) - len(node.args.defaults):], node.args.defaults))
            pairs += [(a, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d is not None]
            found += [(d.lineno, f"{node.name}({a.arg}={d.value})") for a, d in pairs
                      if a.arg in names and _number(d)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            name = node.target.id
            if name in names and _number(node.value) and node.value.value == DEFAULTS.get(name):
                found.append((node.lineno, f"{name}: ... = {node.value.value}"))
        elif isinstance(node, ast.Call):
            found += [(kw.value.lineno, f"{kw.arg}={kw.value.value}") for kw in node.keywords
                      if kw.arg in names and _number(kw.value) and kw.value.value == DEFAULTS.get(kw.arg)]
            flag = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
            if getattr(node.func, "attr", "") == "add_argument" and flag in FLAGS:
                found += [(kw.value.lineno, f"{flag} default={ast.unparse(kw.value)}") for kw in node.keywords
                          if kw.arg == "default" and ast.unparse(kw.value) != "None"]
    return found


def test_no_decision_default_is_stated_outside_its_one_place():
    offenders = []
    for path in sorted((ROOT / "sweeper").rglob("*.py")) + sorted((ROOT / "hydra_plugins").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        on_path = rel.startswith(("sweeper/analysis/", "sweeper/report/", "sweeper/adaptive/", "sweeper/cli/report"))
        if path != HOME:
            offenders += [f"{rel}:{line}: {what}"
                          for line, what in restated_defaults(ast.parse(path.read_text()), on_path)]
    assert not offenders, "decision defaults belong in sweeper/config/decision.py only:\n" + "\n".join(offenders)


@pytest.mark.parametrize("code", [
    "def analyze(runs, alpha: float = 0.05): ...",
    "def f(x, *, n_resamples=10_000): ...",
    "def f(min_seeds=3): ...",
    "@dataclass\nclass Design:\n    alpha: float = 0.05\n",
    "verdict.analyze(runs, alpha=0.05)",
    "p.add_argument('--alpha', type=float, default=0.05)",
    "p.add_argument('--seed', type=int, default=0)",
])
def test_the_check_sees_each_way_of_restating_a_default(code):
    assert restated_defaults(ast.parse(code)), code


def test_the_check_lets_other_numbers_pass():
    code = ("ax.grid(alpha=0.3)\nTestResult(n_resamples=0)\ndef f(x, n: int = 3): ...\n"
            "DecisionOptions(n_resamples=200)\nclass T:\n    n_resamples: int = 0\n")
    assert restated_defaults(ast.parse(code)) == []
    assert restated_defaults(ast.parse("def run_config(cfg, seed: int = 0): ..."), decision_path=False) == []


# independent seeds: the exact permutation test gives p 0.016 (rope beats nope at 0.05); at alpha 0.001 its floor
# is too high and the t-test's p 0.007 decides nothing
ROPE = {"rope": [3.00, 3.03, 2.98, 3.02, 3.01], "nope": [3.04, 3.06, 3.03, 3.08, 3.05]}


@pytest.fixture
def manifest_reads(monkeypatch):
    """Counts every parse of a sweep manifest (sweep.json), whoever asks for it."""
    reads = []
    parse = manifest_mod._manifest_from

    def counted(d, path):
        reads.append(Path(path))
        return parse(d, path)

    monkeypatch.setattr(manifest_mod, "_manifest_from", counted)
    return reads


def test_a_report_reads_the_manifest_once(tmp_path, manifest_reads):
    root = write_sweep(tmp_path / "s", ROPE, baseline="rope", paired=False)
    text = report_sweep(root, FAST, plots=False, journal=str(tmp_path / "journal"))
    assert "rope beats nope" in text and (root / "report.md").is_file()
    assert manifest_reads == [root / "sweep.json"]


def test_a_comparison_of_two_sweeps_reads_each_manifest_once(tmp_path, manifest_reads):
    old = write_sweep(tmp_path / "old", ROPE, baseline="rope", paired=False)
    new = write_sweep(tmp_path / "new", ROPE, baseline="rope", paired=False)
    compare_sweeps(new, old, FAST, plots=False)
    assert sorted(manifest_reads) == sorted([new / "sweep.json", old / "sweep.json"])


@pytest.mark.slow
def test_the_sweeps_decision_options_decide_its_report(tmp_path, capsys):
    """sweeper.decision reaches the verdict: at alpha 0.05 rope beats nope on 5 + 5 seeds, at 0.001 it does not,
    and min_seeds=6 makes the same arms insufficient."""
    root = write_sweep(tmp_path / "s", ROPE, baseline="rope", paired=False)
    for decision, says in [(FAST, "alpha 0.05"), (dataclasses.replace(FAST, alpha=0.001), "alpha 0.001"),
                           (dataclasses.replace(FAST, min_seeds=6), "need 6")]:
        finish(root, SweeperConf(journal="off", decision=decision), {})
        report = (root / "report.md").read_text()
        assert says in report, (decision, report[:2000])
        beats = "rope beats nope" in capsys.readouterr().out
        assert beats == (decision == FAST), decision


def _record_decision(root, decision: dict) -> None:
    path = root / "sweep.json"
    data = json.loads(path.read_text())
    data["decision"] = decision                      # what the sweep's own sweeper.decision block records
    path.write_text(json.dumps(data))


def test_a_later_report_decides_by_the_sweeps_own_options_unless_a_flag_says_otherwise(tmp_path, capsys):
    root = write_sweep(tmp_path / "s", ROPE, baseline="rope", paired=False)
    _record_decision(root, {"alpha": 0.001, "n_resamples": 200})
    text = report_sweep(root, ReportFlags.parse({"alpha": None}, FLAG_OF), plots=False, journal="off")
    assert "rope beats nope" not in text and "alpha 0.001" in (root / "report.md").read_text()
    text = report_sweep(root, ReportFlags.parse({"alpha": 0.05}, FLAG_OF), plots=False, journal="off")
    assert "rope beats nope" in text and "alpha 0.05" in (root / "report.md").read_text()     # the flag wins
    _record_decision(root, {"alpha": 1.5})
    with pytest.raises(UsageError, match=r"sweep.json decision.alpha 1.5: accepted values are between 0 and 1"):
        report_sweep(root, ReportFlags.parse({}, FLAG_OF), plots=False, journal="off")


@pytest.mark.slow
def test_the_report_command_uses_the_recorded_options(tmp_path):
    root = write_sweep(tmp_path / "s", ROPE, baseline="rope", paired=False)
    _record_decision(root, {"alpha": 0.001})
    proc = run_sweeper(str(root), "--no-plots", "--resamples", "200", module="sweeper.report")
    assert proc.returncode == 0 and "alpha 0.001" in proc.stdout and "rope beats nope" not in proc.stdout, proc.stdout


@pytest.mark.slow
def test_the_adaptive_design_takes_the_sweeps_alpha(tmp_path):
    fixture = ROOT / "tests" / "fixtures" / "adaptive"
    proc = run_sweeper("--config-dir", str(fixture / "conf"), "+experiment=ad", "seeds=adaptive", "sweeper.journal=off",
                       "sweeper.dry_run=true", "sweeper.decision.alpha=0.01", f"sweeper.dir={tmp_path / 's'}",
                       cwd=fixture, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "alpha 0.01 over 2 comparison(s)" in proc.stdout, proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("flag, value, accepted", [
    ("--alpha", "1.5", "accepted values are between 0 and 1"),
    ("--min-seeds", "1", "must be an integer >= 2"),
    ("--resamples", "10", "must be an integer >= 100"),
])
def test_a_bad_report_flag_is_one_line_naming_it(tmp_path, flag, value, accepted):
    root = write_sweep(tmp_path / "s", ROPE, baseline="rope", paired=False)
    proc = run_sweeper(str(root), flag, value, "--no-plots", module="sweeper.report")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr == f"sweeper.report: error: {flag} {value}: {accepted}" + proc.stderr.split(accepted, 1)[1]
    assert len(proc.stderr.strip().splitlines()) == 1 and not (root / "report.md").exists()


@pytest.mark.slow
def test_a_sweeps_own_decision_options_are_recorded_and_resume_keeps_them(tmp_path):
    from sweeper.cli.resume import load_plan
    from sweeper.config.sweep import compose_sweep
    from sweeper.plan.make import make_plan, write_plan

    own = make_plan(compose_sweep(["+experiment=rope", f"sweeper.dir={tmp_path / 'own'}",
                                   "sweeper.decision.alpha=0.01", "sweeper.decision.min_seeds=4"]), [0, 1])
    write_plan(own, ["+experiment=rope"])
    assert manifest_mod.read_manifest(tmp_path / "own").extra["decision"]["alpha"] == 0.01
    loaded, _ = load_plan(tmp_path / "own", [])
    assert loaded.sweep.sweeper.decision == DecisionOptions(alpha=0.01, min_seeds=4)
    plain = make_plan(compose_sweep(["+experiment=rope", f"sweeper.dir={tmp_path / 'plain'}"]), [0, 1])
    write_plan(plain, ["+experiment=rope"])
    assert "decision" not in manifest_mod.read_manifest(tmp_path / "plain").extra   # defaults: manifest as before
    assert load_plan(tmp_path / "plain", [])[0].sweep.sweeper.decision == DecisionOptions()
