"""HealthReport / CheckResult: verdict rules, the health.json contract, atomic writes, the table.

    python -m pytest -q tests/test_health_result.py
"""
from __future__ import annotations

import json
import math

import pytest

from sweeper.health import CheckResult, HealthReport


def report(*statuses):
    return HealthReport([CheckResult(f"c{i}", s, float(i), "", f"message {i}") for i, s in enumerate(statuses)])


@pytest.mark.parametrize("statuses,verdict", [
    ((), "pass"), (("pass", "skip"), "pass"), (("skip",), "pass"), (("pass", "warn", "skip"), "warn"),
    (("warn", "fail", "pass"), "fail"), (("fail",), "fail"),
])
def test_verdict_is_the_worst_status_and_skip_never_counts(statuses, verdict):
    r = report(*statuses)
    assert r.verdict == verdict
    assert r.ok == (verdict != "fail")
    assert [c.status for c in r.failures] == ["fail"] * statuses.count("fail")


def test_health_json_matches_the_contract_and_round_trips(tmp_path):
    r = HealthReport([
        CheckResult("gradient_flow", "fail", 2, "0 dead parameters", "q_proj.weight: gradient exactly zero",
                    {"dead": ["q_proj.weight", "k_proj.weight"], "rms": {"a": math.inf}}),
        CheckResult("finite", "fail", math.nan, "no NaN/inf", "diverged"),
        CheckResult("causality", "skip"),
    ])
    path = r.write(tmp_path / "run" / "health.json")
    raw = json.loads(path.read_text())                      # strict JSON: nan/inf written as strings
    assert raw["verdict"] == "fail"
    assert [set(c) for c in raw["checks"]] == [{"name", "status", "value", "expected", "message", "details"},
                                               {"name", "status", "value", "expected", "message"},
                                               {"name", "status", "value", "expected", "message"}]
    assert raw["checks"][0]["details"]["rms"]["a"] == "inf" and raw["checks"][1]["value"] == "nan"
    back = HealthReport.read(path)
    assert back.verdict == "fail" and back["gradient_flow"].value == 2.0 and math.isnan(back["finite"].value)
    assert back.to_dict() == r.to_dict()
    assert [p.name for p in path.parent.iterdir()] == ["health.json"]          # no temp file left behind


def test_bad_status_and_unknown_check_name_errors():
    with pytest.raises(ValueError, match=r"CheckResult.status='ok': expected one of pass, warn, fail, skip, error"):
        CheckResult("x", "ok")
    with pytest.raises(KeyError, match=r"no check named 'nope'; checks: c0, c1"):
        report("pass", "warn")["nope"]


def test_table_shows_every_check_with_its_wrapped_message():
    long = "blocks.0.attn.q_proj.weight: gradient exactly zero; " * 4
    r = HealthReport([CheckResult("gradient_flow", "fail", 4, "0 dead parameters", long),
                      CheckResult("causality", "pass", 0.0, "<= 1e-06", "fine")])
    text = str(r)
    lines = text.splitlines()
    assert lines[0].split() == ["check", "status", "value", "expected"]
    assert lines[2].split()[:3] == ["gradient_flow", "FAIL", "4"]
    assert all(len(line) <= 100 for line in lines)
    assert " ".join(text.split()).count("q_proj.weight: gradient exactly zero") == 4      # wrapped, not cut
    assert lines[-1] == "verdict: FAIL"
    assert repr(r) == "HealthReport(verdict='fail', pass=1, warn=0, fail=1, skip=0, error=0)"


def test_merged_reports_keep_order():
    merged = report("pass").merged(HealthReport([CheckResult("finite", "fail")]))
    assert [c.name for c in merged.checks] == ["c0", "finite"] and merged.verdict == "fail"
