"""Health-check results: one `CheckResult` per check, gathered in a `HealthReport`.

    report = HealthReport([CheckResult("init_loss", "pass", 2.31, "[1.80, 3.30]", "loss at init 2.31 ...")])
    print(report)            # readable table
    report.ok                # False when any check failed
    report.write(run_dir / "health.json")    # atomic; HealthReport.read(path) loads it back

Pure Python (no torch) so the sweeper parent process can read and print health.json cheaply.
The JSON schema is the team contract: {"verdict": pass|warn|fail, "checks": [{"name", "status", "value",
"expected", "message"}]}; a check may add "details" (a dict of extra figures, e.g. every offending parameter).
A run's report (the live monitor's, health.json) adds "diagnosis": {"name", "kind", "invalidates", "check", "step",
"message", "fix", "evidence"}: its one named diagnosis by the debugging checklist's tree (diagnosis.py).
A check that does not apply (no sequence dim given, no reference kernel) has status "skip" and never
changes the verdict; one skipped only because an argument was left out carries details["enable"] (e.g.
"num_classes=...") and is listed loudly as "not run" under the verdict and in the JSON ("not_run"). A check that
could not handle the model (an exception inside the check) has status "error" with the reason: it counts as a
warning for the verdict, is listed in "errored", and the other checks still run.
"""
from __future__ import annotations

import json
import math
import os
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

STATUSES = ("pass", "warn", "fail", "skip", "error")
_SEVERITY = {"skip": 0, "pass": 0, "warn": 1, "error": 1, "fail": 2}


@dataclass
class CheckResult:
    """One check: its status, the measured figure, the range expected, and a one-line explanation.

    `message` names the parameter or tensor at fault and the likely cause when the check does not pass.
    """

    name: str
    status: str
    value: float | None = None
    expected: str = ""
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"CheckResult.status={self.status!r}: expected one of {', '.join(STATUSES)}")
        if self.value is not None:
            self.value = float(self.value)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "status": self.status, "value": _json_number(self.value),
                               "expected": self.expected, "message": self.message}
        if self.details:
            out["details"] = _jsonable(self.details)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CheckResult":
        value = d.get("value")
        return cls(name=d["name"], status=d["status"], value=None if value is None else float(value),
                   expected=d.get("expected", ""), message=d.get("message", ""), details=d.get("details") or {})


@dataclass
class HealthReport:
    """All checks of one model or run. `verdict` is the worst status: fail > warn > pass."""

    checks: list[CheckResult] = field(default_factory=list)
    diagnosis: dict[str, Any] | None = None     # a run's one named diagnosis (sweeper.health.diagnosis)

    @property
    def verdict(self) -> str:
        worst = max((_SEVERITY[c.status] for c in self.checks), default=0)
        return {0: "pass", 1: "warn", 2: "fail"}[worst]

    @property
    def ok(self) -> bool:
        """True when no check failed (warnings allowed)."""
        return self.verdict != "fail"

    @property
    def failures(self) -> list[CheckResult]:
        return [c for c in self.checks if c.status == "fail"]

    @property
    def warnings(self) -> list[CheckResult]:
        return [c for c in self.checks if c.status == "warn"]

    @property
    def errors(self) -> list[CheckResult]:
        """Checks that could not handle the model (status "error"); the message says why."""
        return [c for c in self.checks if c.status == "error"]

    @property
    def not_run(self) -> list[str]:
        """'init_loss (pass num_classes=...)' for every check skipped only because an argument was missing."""
        return [f"{c.name} (pass {c.details['enable']})" for c in self.checks
                if c.status == "skip" and c.details.get("enable")]

    def summary_line(self) -> str:
        """'verdict: PASS; errored: gradient_flow; not run: init_loss (pass num_classes=...)'."""
        line = f"verdict: {self.verdict.upper()}"
        if self.errors:
            line += f"; errored: {', '.join(c.name for c in self.errors)}"
        if self.not_run:
            line += f"; not run: {', '.join(self.not_run)}"
        return line

    def __getitem__(self, name: str) -> CheckResult:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(f"no check named {name!r}; checks: {', '.join(c.name for c in self.checks)}")

    def __contains__(self, name: object) -> bool:
        return any(c.name == name for c in self.checks)

    def add(self, check: CheckResult) -> None:
        self.checks.append(check)

    def merged(self, other: "HealthReport | Iterable[CheckResult]") -> "HealthReport":
        extra = other.checks if isinstance(other, HealthReport) else list(other)
        return HealthReport(list(self.checks) + list(extra))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verdict": self.verdict, "checks": [c.to_dict() for c in self.checks]}
        if self.errors:
            out["errored"] = [c.name for c in self.errors]
        if self.not_run:
            out["not_run"] = self.not_run
        if self.diagnosis is not None:
            out["diagnosis"] = _jsonable(self.diagnosis)
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "HealthReport":
        return cls([CheckResult.from_dict(c) for c in d.get("checks", [])], diagnosis=d.get("diagnosis"))

    def write(self, path: str | os.PathLike) -> Path:
        """Write as JSON atomically: a temp file beside it, then a rename (a reader never sees half a file)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(self.to_json() + "\n", encoding="utf-8")
        os.replace(tmp, path)
        return path

    @classmethod
    def read(cls, path: str | os.PathLike) -> "HealthReport":
        """health.json back; ValueError naming the file when it is not a health report."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls.from_dict(data)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"{path}: not a readable health report ({type(e).__name__}: {e}); delete it, the "
                             f"next run writes a new one") from None

    def __str__(self) -> str:
        return format_table(self)

    def __repr__(self) -> str:
        counts = {s: sum(c.status == s for c in self.checks) for s in STATUSES}
        return f"HealthReport(verdict={self.verdict!r}, " + ", ".join(f"{k}={v}" for k, v in counts.items()) + ")"


def format_table(report: HealthReport, width: int = 100) -> str:
    """A fixed-width table: check | status | value | expected, then the message wrapped below, indented."""
    rows = [("check", "status", "value", "expected")]
    for c in report.checks:
        rows.append((c.name, c.status.upper(), _fmt_value(c.value), c.expected))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = []
    for i, r in enumerate(rows):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
        if i == 0:
            lines.append("-" * min(width, sum(widths) + 6))
        else:
            msg = report.checks[i - 1].message
            if msg:
                lines.extend(textwrap.wrap(msg, width, initial_indent="    ", subsequent_indent="      "))
    lines.append(report.summary_line())
    if report.diagnosis:
        d = report.diagnosis
        lines.append(f"diagnosis: {d['name']} ({d['kind']}{', invalidates the run' if d.get('invalidates') else ''})"
                     + (f" from step {d['step']}" if d.get("step") is not None else ""))
    return "\n".join(lines)


def name_list(items: list[str], limit: int = 4) -> str:
    """The first `limit` items for a one-line message, "a; b; c; d; (+3 more)" (the full list goes to details)."""
    head = "; ".join(items[:limit])
    return head + (f"; (+{len(items) - limit} more)" if len(items) > limit else "")


def _fmt_value(v: float | None) -> str:
    if v is None:
        return "-"
    if v != v or math.isinf(v):
        return str(v)
    if v == 0 or 1e-3 <= abs(v) < 1e5:
        return f"{v:.4g}"
    return f"{v:.2e}"


def _json_number(v: float | None) -> float | str | None:
    """JSON has no NaN/inf: write them as strings ("nan", "inf") so the file stays valid JSON."""
    if v is None:
        return None
    if v != v or math.isinf(v):
        return str(v)
    return v


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float):
        return _json_number(obj)
    if isinstance(obj, (int, str, bool)) or obj is None:
        return obj
    try:  # numpy / torch scalars
        return _json_number(float(obj))
    except (TypeError, ValueError):
        return str(obj)
