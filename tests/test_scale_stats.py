"""No statistic overflows at any n or any finite value (issue 48, scale): exact tests that cannot enumerate fall back
to Monte Carlo, said so in the report; huge values (1e308) and their differences are decided like small ones.

    python -m pytest -q -n 0 tests/test_scale_stats.py
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from sweeper.analysis import robust, stats
from sweeper.run.files.atomic import one_sync
from sweeper.run.files.experiment import Experiment
from sweeper.run.files.manifest import Manifest, RunEntry, write_manifest
from sweeper.run.files.records import StatusRecord, Summary
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import Status
from tests.helpers.commands import run_sweeper


def finished_sweep(root, finals: dict[str, list[float | None]]) -> None:
    """A sweep dir of finished runs (None: a diverged run) with only what the report reads: status, summary,
    manifest; no fingerprints, so the design is independent. One sync at the end: thousands of runs in seconds."""
    entries = []
    with one_sync(root):
        for variant, values in finals.items():
            for seed, value in enumerate(values):
                rel = f"runs/{variant}/seed_{seed}"
                entries.append(RunEntry(run_id=f"{variant}-s{seed}", variant=variant, seed=seed, run_dir=rel,
                                        config_hash=f"h-{variant}"))
                rd = RunDir(root / rel)
                rd.path.mkdir(parents=True)
                st = Status.FINISHED if value is not None else Status.DIVERGED
                rd.write_status(StatusRecord(status=st, run_id=f"{variant}-s{seed}", experiment="big",
                                             variant=variant, seed=seed, exit_code=0, started=0.0, ended=1.0))
                rd.write_summary(Summary(status=st, final={"val_loss": value}, steps=1, wall_time_s=0.1,
                                         run_id=f"{variant}-s{seed}", variant=variant, seed=seed))
        experiment = Experiment(name="big", baseline="a", metric="val_loss", lower_is_better=True,
                                variants={v: [] for v in finals})
        write_manifest(root, Manifest(experiment=experiment, runs=entries, seeds=list(range(max(map(len,
                                                                                                   finals.values())))),
                                      created=0.0, argv=["test"]))


def report(sweep_dir, *flags: str) -> str:
    r = run_sweeper(str(sweep_dir), *flags, module="sweeper.report", timeout=600)
    assert r.returncode == 0 and "Warning" not in r.stderr, r.stdout[-2000:] + r.stderr[-2000:]
    return r.stdout


@pytest.mark.slow
def test_a_sweep_of_1560_runs_reports_every_comparison_by_monte_carlo_where_it_cannot_enumerate(tmp_path):
    """520 seeds per arm: C(1040, 520) > 1e308 (the float the exact floor was divided in) and the worst-rank null's
    exact table would be 10^9 cells; the report decides both by Monte Carlo and names it so."""
    rng = np.random.default_rng(0)
    c = list(rng.normal(1.0, 0.1, 520))
    c[3] = c[7] = None                                     # two lost seeds: the worst-rank test decides c vs a
    finished_sweep(tmp_path, {"a": list(rng.normal(1.0, 0.1, 520)), "b": list(rng.normal(1.1, 0.1, 520)), "c": c})
    out = report(tmp_path, "--no-plots")
    rows = {line.split()[0]: line for line in out.splitlines() if line.split()[1:3] == ["vs", "a"]}   # table rows
    assert "Monte Carlo permutation test of Welch's t" in rows["b"] and "worse" in rows["b"], out
    assert "Monte Carlo worst-rank test" in rows["c"] and "518/520" in rows["c"], out
    assert "internal error" not in out


@pytest.mark.slow
@pytest.mark.parametrize("finals, verdict", [
    ({"a": [1e308, 1.2e308, 1.1e308, 1.3e308, 1.05e308, 1.15e308],
      "b": [-1e308, -1.2e308, -1.1e308, -1.3e308, -1.05e308, -1.15e308]}, "better"),     # differences overflow
    ({"a": [1.7e308] * 3 + [1.6e308] * 3, "b": [1.79e308] * 3 + [1.75e308] * 3}, "worse"),  # sums overflow
    ({"a": [1.0, 1.1, 1.2, 1.05, 1.15, 1.12], "b": [1e308, 1.0, 1.1, 1.2, 1.3, 1.25]}, "inconclusive"),
    ({"a": [1e308, 1.2e308, 1.1e308, None, 1.05e308, 1.15e308],
      "b": [-1e308, -1.2e308, -1.1e308, -1.3e308, -1.05e308, -1.15e308]}, "better"),     # worst-rank
])
def test_finite_but_huge_values_are_decided_by_the_report(tmp_path, finals, verdict):
    """Any finite metric value is a value: 1e308 per seed, arms whose sums or differences pass the largest float
    (the difference is then shown as inf), one huge outlier seed; the report decides instead of crashing."""
    finished_sweep(tmp_path, finals)
    out = report(tmp_path)                                  # with its plots: drawn in units of 1e308
    row = next(line for line in out.splitlines() if line.split()[:3] == ["b", "vs", "a"])
    assert f" {verdict} " in row, out
    assert {"final_metric.png", "paired_difference.png"} <= {p.name for p in (tmp_path / "plots").iterdir()}
    if verdict == "better" and None not in finals["a"]:          # the difference itself passes the largest float
        assert "b has lower val_loss by more than the largest float" in out, out


def test_exact_floors_and_zero_spread_results_at_thousands_of_seeds_are_numbers_not_overflows():
    assert robust.floor(False, 2000, 2000) == 0.0 and robust.floor(True, 5000, 5000) == 0.0
    assert stats.smallest_p("signflip", 5000) == 0.0 and stats.smallest_p("permutation", 1500, 1500) == 0.0
    zero = robust.deciding_test(np.ones(1500), np.zeros(1500), False)
    assert zero.pvalue == 0.0 and zero.exact and zero.n_resamples == 0      # C(3000, 1500): counted by formula
    assert robust.deciding_test(np.ones(2000), np.zeros(2000), True).pvalue == 0.0
    assert robust.uses_permutation(False, 1500, 1500) and robust.uses_permutation(True, 1500, 1500)


def test_the_worst_rank_null_falls_back_to_monte_carlo_beyond_its_exact_table():
    rng = np.random.default_rng(2)
    a, b = rng.normal(0.4, 1, 150), rng.normal(0, 1, 160)
    w = stats.worst_rank_test(a, b, 3, 0, True, n_resamples=4000, seed=1)
    assert not w.test.exact and w.test.name == "Monte Carlo worst-rank test" and w.test.n_resamples == 4000
    assert w.test.min_p == pytest.approx(1 / 4001) and 0 < w.test.pvalue < 1
    small = stats.worst_rank_test(a[:20], b[:20], 3, 0, True)                 # enumerated: exact as before
    assert small.test.exact and small.test.name == "worst-rank test"


def test_the_worst_rank_interval_bisected_at_many_seeds_is_the_enumerated_one(monkeypatch):
    """Beyond WORST_RANK_PAIRS pairwise differences the interval's ends are bisected on the shift (O(n log n)
    each): the same ends as enumerating every difference."""
    rng = np.random.default_rng(5)
    cases = []
    for _ in range(12):
        na, nb, lost_a, lost_b = (int(v) for v in (*rng.integers(3, 25, 2), *rng.integers(0, 3, 2)))
        lower = bool(rng.integers(0, 2))
        w = stats.worst_rank_test(rng.normal(rng.uniform(-1, 1), 1, na), rng.normal(0, 1, nb), lost_a + 1,
                                  lost_b, lower)
        cases.append((w, [stats.worst_rank_interval(w, conf) for conf in (0.95, 0.99)]))
    monkeypatch.setattr(stats, "WORST_RANK_PAIRS", 0)
    for w, enumerated in cases:
        for conf, ref in zip((0.95, 0.99), enumerated):
            got = stats.worst_rank_interval(w, conf)
            assert "bisected" in got.method
            for x, y in ((got.low, ref.low), (got.high, ref.high)):
                assert x == y or (math.isfinite(x) and x == pytest.approx(y, abs=1e-9)), (got, ref)
