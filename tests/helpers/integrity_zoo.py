"""The integrity zoo's runner: sweep a bug/healthy-twin pair of tests/integrity_zoo/ through the real CLI and judge
what the sweep's own output files say.

    from tests.helpers.integrity_zoo import load_cases, run_pair
    outcome = run_pair(load_cases()[0], tmp_path)      # outcome.caught: cause | other | missed; outcome.false_alarms

Used by tests/test_integrity_zoo.py (one test per pair) and benchmarks/integrity_zoo.py (the catch table). Each
pair is a folder with `case.json` (the class, the checks that name its cause, the variant they must name, the
seeds, an optional code edit before a `sweeper.extend`), `conf/experiment/bug.yaml`, `conf/experiment/ok.yaml`
and the project's own files. Each side runs in a fresh copy of the folder (`python -m sweeper --config-dir conf
+experiment=bug|ok seeds=...`, then `python -m sweeper.report SWEEP_DIR --no-plots`); the verdicts come from
summary.csv (`verdict`, `integrity_checks`), the findings from report.md's "Checks across runs" table.
"""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ZOO = Path(__file__).resolve().parents[1] / "integrity_zoo"
# The check names agreed for this round (the team's list; a case may expect only these).
CHECK_NAMES = frozenset({
    "seeds_no_effect", "change_no_effect", "metric_direction", "budget_confound", "selected_final", "no_spread",
    "broken_baseline", "evaluation_identity", "evaluation_varies_with_seed", "nondeterminism", "mixed_code",
    "shared_checkpoint", "writes_outside_run_dir", "eval_is_train", "coarse_metric", "key_never_read",
    "generator_unused", "train_subset", "several_concerns", "shared_state"})
PLAIN_VERDICTS = {"better", "worse", "inconclusive", "insufficient", ""}
SWEEP_TIMEOUT_S = 120


@dataclass(frozen=True)
class Case:
    """One bug/healthy-twin pair, as its case.json declares it."""
    name: str
    klass: str                 # the class of broken sweep (the catch table's row)
    expect: tuple              # the checks that name the cause (any one of them is a catch by cause)
    variant: str | None        # the variant whose verdict or findings must name it (None: any arm)
    api: str                   # "command" (task.command, argv in, JSON out) or "run_api" (sweeper.init)
    seeds: str                 # the seeds of the sweep (of its first part when extended)
    what: str                  # the bug, in a line
    twin: str                  # what the healthy twin does instead (the hard healthy case, if any)
    extend: dict | None = None  # {"seeds": "0-3", "bug": [file, old, new], "ok": [file, old, new]}
    path: Path = Path()


@dataclass(frozen=True)
class Finding:
    """One row of report.md's "Checks across runs" table."""
    check: str
    concerns: str
    effect: str
    silenced: bool


@dataclass
class Side:
    """What one sweep (the bug or its twin) said, read from its own files."""
    refused: str = ""                                 # the one line of a sweep refused at plan time (exit 2)
    verdicts: dict = field(default_factory=dict)      # variant -> summary.csv verdict
    named: dict = field(default_factory=dict)         # variant -> checks named in summary.csv integrity_checks
    findings: list = field(default_factory=list)      # Finding rows of report.md
    report: str = ""                                  # report.md's text
    log: str = ""                                     # the commands and their output, for a failing test

    def names_on(self, variant: str | None) -> set:
        """Unsilenced checks that concern `variant` (any arm when None): its summary row or the findings table."""
        out = set()
        for v, checks in self.named.items():
            if variant is None or v == variant:
                out |= checks
        for f in self.findings:
            if not f.silenced and (variant is None or re.search(rf"(?<![\w-]){re.escape(variant)}(?![\w-])",
                                                              f.concerns) or f.concerns.strip() in {"all", "*"}):
                out.add(f.check)
        return out


@dataclass
class Outcome:
    """The judgement of one pair: how the bug was caught, what the twin raised."""
    case: Case
    caught: str                     # cause | other | missed
    bug_checks: list                # checks named on the expected variant (or anywhere, variant None)
    false_alarms: list              # on the twin: a verdict changed, or a check of the bug's class named
    twin_warnings: list             # on the twin: other findings that change no verdict
    seconds: float = 0.0
    bug: Side | None = None
    ok: Side | None = None

    def explain(self) -> str:
        return (f"{self.case.name} ({self.case.klass}: {self.case.what}): bug {self.caught} "
                f"(named: {', '.join(sorted(self.bug_checks)) or 'nothing'}); twin false alarms: "
                f"{', '.join(self.false_alarms) or 'none'}\n--- bug log ---\n{self.bug.log if self.bug else ''}"
                f"\n--- twin log ---\n{self.ok.log if self.ok else ''}")


def load_cases() -> list[Case]:
    """Every pair of the zoo, sorted by folder name."""
    cases = []
    for spec in sorted(ZOO.glob("*/case.json")):
        d = json.loads(spec.read_text())
        cases.append(Case(name=spec.parent.name, klass=d["class"], expect=tuple(d["expect"]),
                          variant=d.get("variant"), api=d["api"], seeds=d["seeds"], what=d["what"],
                          twin=d["twin"], extend=d.get("extend"), path=spec.parent))
    return cases


def _run(cmd: list, cwd: Path, log: list) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=SWEEP_TIMEOUT_S, env=env)
    log.append(f"$ {' '.join(cmd)}  (exit {p.returncode})\n{p.stdout[-4000:]}{p.stderr[-3000:]}")
    return p


def _edit(project: Path, edit: list) -> None:
    """Apply [file, old, new] to the project copy (the code edit between a sweep and its extension)."""
    target = project / edit[0]
    text = target.read_text()
    if edit[1] not in text:
        raise AssertionError(f"{target}: the edit's text {edit[1]!r} is not there")
    target.write_text(text.replace(edit[1], edit[2]))


def _split_row(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def _findings(report: str) -> list[Finding]:
    """The rows of report.md's "Checks across runs" table (by its header's column names)."""
    m = re.search(r"^## Checks across runs\s*$(.*?)(?=^## )", report, re.M | re.S)
    if not m:
        return []
    tables, block = [], []                            # the section's tables: runs of consecutive "|" lines
    for ln in m.group(1).splitlines() + [""]:
        if ln.startswith("|"):
            block.append(ln)
        elif block:
            tables, block = tables + [block], []
    # the findings table has an effect column (the evidence table beside it says what each check could read)
    lines = next((t for t in tables if len(t) >= 2 and "effect" in t[0].lower()), [])
    if not lines:
        return []
    head = [h.lower() for h in _split_row(lines[0])]
    col = {name: next((i for i, h in enumerate(head) if h.startswith(name)), None)
           for name in ("check", "concerns", "effect", "silenced")}
    out = []
    for ln in lines[2:]:
        cells = _split_row(ln)
        get = lambda k: cells[col[k]] if col[k] is not None and col[k] < len(cells) else ""  # noqa: E731
        out.append(Finding(check=get("check").strip("`"), concerns=get("concerns"), effect=get("effect"),
                           silenced=get("silenced") not in {"", "-"}))
    return out


def sweep_side(case: Case, side: str, work: Path) -> Side:
    """Copy the pair's project to work/side, sweep it (and extend it), report it; read what it says."""
    project = work / side
    shutil.copytree(case.path, project, ignore=shutil.ignore_patterns("case.json", "__pycache__"))
    log: list = []
    base = [sys.executable, "-m", "sweeper", "--config-dir", "conf", f"+experiment={side}",
            "sweeper.report=false", "sweeper.journal=off"]
    p = _run(base + [f"seeds={case.seeds}"], project, log)
    out = Side()
    if p.returncode == 2 and not list(project.glob("sweeps/*/sweep.json")):
        out.refused = (p.stderr.strip().splitlines() or [""])[-1]
        out.log = "\n".join(log)
        return out
    if case.extend:
        if case.extend.get(side):
            _edit(project, case.extend[side])
        _run(base + [f"seeds={case.extend['seeds']}", "sweeper.extend=true"], project, log)
    dirs = [d.parent for d in project.glob("sweeps/*/sweep.json")]
    if len(dirs) != 1:
        raise AssertionError(f"{case.name}/{side}: expected one sweep dir, found {dirs}\n" + "\n".join(log))
    _run([sys.executable, "-m", "sweeper.report", str(dirs[0]), "--no-plots", "--journal", "off",
          "--resamples", "2000"], project, log)
    out.log = "\n".join(log)
    summary = dirs[0] / "summary.csv"
    if summary.exists():
        for row in csv.DictReader(summary.open()):
            out.verdicts[row["variant"]] = (row.get("verdict") or "").strip()
            out.named[row["variant"]] = {c.strip() for c in re.split(r"[;,\s]+", row.get("integrity_checks") or "")
                                         if c.strip()}
    report = dirs[0] / "report.md"
    out.report = report.read_text() if report.exists() else ""
    out.findings = _findings(out.report)
    return out


def judge(case: Case, bug: Side, ok: Side) -> Outcome:
    """Caught by cause / by another check / missed; the twin's false alarms and other warnings."""
    if bug.refused:
        named = {c for c in case.expect if c in bug.refused}
        bug_checks = sorted(named) or [f"refused: {bug.refused}"]
        caught = "cause" if named else "other"
    else:
        bug_checks = sorted(bug.names_on(case.variant))
        changed = case.variant is not None and bug.verdicts.get(case.variant, "") not in PLAIN_VERDICTS
        caught = ("cause" if set(bug_checks) & set(case.expect)
                  else "other" if bug_checks or changed else "missed")
    alarms, warnings = [], []
    if ok.refused:
        alarms.append(f"refused: {ok.refused}")
    for v, verdict in ok.verdicts.items():
        if verdict not in PLAIN_VERDICTS:
            alarms.append(f"{v}: {verdict} ({', '.join(sorted(ok.named.get(v, ()))) or 'no check named'})")
    for f in ok.findings:
        if f.silenced:
            continue
        if f.check in case.expect:
            alarms.append(f"{f.check} on {f.concerns} ({f.effect})")
        else:
            warnings.append(f"{f.check} on {f.concerns} ({f.effect})")
    return Outcome(case=case, caught=caught, bug_checks=bug_checks, false_alarms=sorted(set(alarms)),
                   twin_warnings=sorted(set(warnings)), bug=bug, ok=ok)


def run_pair(case: Case, work: Path) -> Outcome:
    """Sweep both sides of a pair under `work` and judge them."""
    import time
    t = time.perf_counter()
    bug = sweep_side(case, "bug", work)
    ok = sweep_side(case, "ok", work)
    outcome = judge(case, bug, ok)
    outcome.seconds = time.perf_counter() - t
    return outcome
